package pool

import (
	"context"
	"errors"
	"slices"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/shepherd-go/shepherd/internal/redistest"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// Hostile input to every public call: each case fails at once with a clear
// error and leaves nothing behind in Redis.

// stableKeys lists the pool's keys without the janitor lease, which
// expires and comes back by itself.
func stableKeys(t *testing.T, n *Node) []string {
	t.Helper()
	var out []string
	for _, k := range redistest.Keys(t, srv.Client(), n.lay.space.Pattern()) {
		if k != n.lay.janitor {
			out = append(out, k)
		}
	}
	return out
}

// hashFields lists the fields of the pool's job and payload hashes.
func hashFields(t *testing.T, n *Node) []string {
	t.Helper()
	ctx := testCtx(t, 10*time.Second)
	jobs, err := n.rdb.HKeys(ctx, n.lay.jobs).Result()
	require.NoError(t, err)
	payloads, err := n.rdb.HKeys(ctx, n.lay.payloads).Result()
	require.NoError(t, err)
	return append(jobs, payloads...)
}

// atOnce is how long a rejected call may take.
const atOnce = time.Second

func TestHostileInputToNodeCalls(t *testing.T) {
	t.Parallel()
	pool := redistest.Name(t)
	n := addNode(t, srv.Client(), pool, WithMaxPayloadSize(1024))
	rec := newRecorder()
	addWorkers(t, n, rec, 1)
	huge := strings.Repeat("k", MaxKeySize+1)
	big := make([]byte, 1025)
	cancelled, cancel := context.WithCancel(context.Background())
	cancel()
	cases := []struct {
		name string
		call func(ctx context.Context) error
		want error // nil: any error
	}{
		{"DispatchJob empty key", func(ctx context.Context) error { return n.DispatchJob(ctx, "", nil) }, ErrInvalidKey},
		{"DispatchJob huge key", func(ctx context.Context) error { return n.DispatchJob(ctx, huge, nil) }, ErrInvalidKey},
		{"DispatchJob oversized payload", func(ctx context.Context) error { return n.DispatchJob(ctx, "k", big) }, ErrPayloadTooLarge},
		{"DispatchJob cancelled ctx", func(context.Context) error { return n.DispatchJob(cancelled, "k", nil) }, context.Canceled},
		{"StopJob empty key", func(ctx context.Context) error { return n.StopJob(ctx, "") }, ErrInvalidKey},
		{"StopJob huge key", func(ctx context.Context) error { return n.StopJob(ctx, huge) }, ErrInvalidKey},
		{"StopJob unknown key", func(ctx context.Context) error { return n.StopJob(ctx, "nope") }, ErrJobNotFound},
		{"StopJob binary unknown key", func(ctx context.Context) error { return n.StopJob(ctx, "\x00\xff{}*") }, ErrJobNotFound},
		{"NotifyWorker empty key", func(ctx context.Context) error { return n.NotifyWorker(ctx, "", nil) }, ErrInvalidKey},
		{"NotifyWorker huge key", func(ctx context.Context) error { return n.NotifyWorker(ctx, huge, nil) }, ErrInvalidKey},
		{"NotifyWorker oversized payload", func(ctx context.Context) error { return n.NotifyWorker(ctx, "k", big) }, ErrPayloadTooLarge},
		{"NotifyWorker unknown key", func(ctx context.Context) error { return n.NotifyWorker(ctx, "nope", nil) }, ErrJobNotFound},
		{"AddWorker nil handler", func(ctx context.Context) error { _, err := n.AddWorker(ctx, nil); return err }, ErrInvalidOption},
		{"RemoveWorker nil", func(ctx context.Context) error { return n.RemoveWorker(ctx, nil) }, ErrUnknownWorker},
		{"RemoveWorker of another node", func(ctx context.Context) error {
			return n.RemoveWorker(ctx, &Worker{node: &Node{}})
		}, ErrUnknownWorker},
		{"JobKeys cancelled ctx", func(context.Context) error { _, err := n.JobKeys(cancelled); return err }, context.Canceled},
		{"Stats cancelled ctx", func(context.Context) error { _, err := n.Stats(cancelled); return err }, context.Canceled},
	}
	before := stableKeys(t, n)
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			ctx := testCtx(t, 10*time.Second)
			start := time.Now()
			err := tc.call(ctx)
			require.Error(t, err)
			if tc.want != nil {
				require.ErrorIs(t, err, tc.want)
			}
			assert.Less(t, time.Since(start), atOnce, "rejected too slowly")
			assert.Empty(t, hashFields(t, n), "left a job record behind")
			assert.Equal(t, before, stableKeys(t, n), "left keys behind")
		})
	}
	assert.Empty(t, rec.runningKeys(), "a rejected call started a job")
}

// Binary keys and nil payloads are valid: they run and leave nothing.
func TestHostileButValidKeysAndPayloads(t *testing.T) {
	t.Parallel()
	n := addNode(t, srv.Client(), redistest.Name(t))
	rec := newRecorder()
	addWorkers(t, n, rec, 2)
	before := stableKeys(t, n)
	ctx := testCtx(t, 20*time.Second)
	for _, key := range []string{"\x00", "\xff\xfe binary \n", "{other}", "*?[", " ", strings.Repeat("é", MaxKeySize/2)} {
		require.NoError(t, n.DispatchJob(ctx, key, nil), "%q", key)
		require.Equal(t, 1, rec.runningKeys()[key], "%q", key)
		require.ErrorIs(t, n.DispatchJob(ctx, key, []byte("again")), ErrJobExists)
		require.NoError(t, n.NotifyWorker(ctx, key, nil))
		require.NoError(t, n.StopJob(ctx, key), "%q", key)
		require.Zero(t, rec.runningKeys()[key], "%q", key)
	}
	assert.Empty(t, hashFields(t, n))
	// Only the counters remain, which count the Starts (the pool's
	// history, deleted by Shutdown).
	want := append(slices.Clone(before), n.lay.counters)
	sort.Strings(want)
	assert.Equal(t, want, stableKeys(t, n), "left keys behind")
	st, err := n.Stats(ctx)
	require.NoError(t, err)
	assert.Equal(t, int64(6), st.Started)
}

func TestHostileOptionsAndAddNode(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name   string
		pool   string
		client redis.UniversalClient
		opts   []NodeOption
	}{
		{"nil client", "p", nil, nil},
		{"nil *redis.Client", "p", (*redis.Client)(nil), nil},
		{"empty pool name", "", srv.Client(), nil},
		{"pool name with }", "a}b", srv.Client(), nil},
		{"nil option", "p", srv.Client(), []NodeOption{nil}},
		{"nil logger", "p", srv.Client(), []NodeOption{WithLogger(nil)}},
		{"zero WorkerTTL", "p", srv.Client(), []NodeOption{WithWorkerTTL(0)}},
		{"negative WorkerTTL", "p", srv.Client(), []NodeOption{WithWorkerTTL(-time.Second)}},
		{"zero PendingJobTTL", "p", srv.Client(), []NodeOption{WithPendingJobTTL(0)}},
		{"negative PendingJobTTL", "p", srv.Client(), []NodeOption{WithPendingJobTTL(-1)}},
		{"zero WorkerShutdownTTL", "p", srv.Client(), []NodeOption{WithWorkerShutdownTTL(0)}},
		{"negative WorkerShutdownTTL", "p", srv.Client(), []NodeOption{WithWorkerShutdownTTL(-time.Hour)}},
		{"zero JobSinkBlockDuration", "p", srv.Client(), []NodeOption{WithJobSinkBlockDuration(0)}},
		{"negative JobSinkBlockDuration", "p", srv.Client(), []NodeOption{WithJobSinkBlockDuration(-1)}},
		{"zero MaxQueuedJobs", "p", srv.Client(), []NodeOption{WithMaxQueuedJobs(0)}},
		{"negative MaxQueuedJobs", "p", srv.Client(), []NodeOption{WithMaxQueuedJobs(-5)}},
		{"zero MaxPayloadSize", "p", srv.Client(), []NodeOption{WithMaxPayloadSize(0)}},
		{"negative MaxPayloadSize", "p", srv.Client(), []NodeOption{WithMaxPayloadSize(-1)}},
		{"empty node name", "p", srv.Client(), []NodeOption{WithName("")}},
		{"long name", "p", srv.Client(), []NodeOption{WithName(strings.Repeat("n", MaxNameSize+1))}},
		{"name with a control character", "p", srv.Client(), []NodeOption{WithName("a\x00b")}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			pool := tc.pool
			if pool == "p" {
				pool = redistest.Name(t)
			}
			start := time.Now()
			n, err := AddNode(testCtx(t, 10*time.Second), tc.client, pool, tc.opts...)
			require.ErrorIs(t, err, ErrInvalidOption)
			require.Nil(t, n)
			assert.Less(t, time.Since(start), atOnce)
			if lay, err := newLayout(pool); err == nil {
				assert.Empty(t, redistest.Keys(t, srv.Client(), lay.space.Pattern()), "left keys behind")
			}
		})
	}
}

// Every call on a closed node, and on a node whose pool shut down, fails
// at once; Close and Shutdown stay idempotent; nothing comes back.
func TestHostileCallsAfterCloseAndShutdown(t *testing.T) {
	t.Parallel()
	pool := redistest.Name(t)
	closed := addNode(t, srv.Client(), pool)
	client := addNode(t, srv.NewClient(), pool, WithClientOnly())
	shut := addNode(t, srv.NewClient(), pool)
	addWorkers(t, shut, newRecorder(), 1)
	ctx := testCtx(t, 30*time.Second)
	require.NoError(t, closed.Close(ctx))
	require.NoError(t, closed.Close(ctx), "Close is idempotent")
	require.NoError(t, client.DispatchJob(ctx, "k", nil))
	require.NoError(t, shut.Shutdown(ctx))
	require.NoError(t, shut.Shutdown(ctx), "Shutdown is idempotent")
	select {
	case <-client.Done():
	case <-time.After(10 * time.Second):
		t.Fatal("the client node did not close with the pool")
	}
	calls := map[string]func(n *Node) error{
		"DispatchJob":  func(n *Node) error { return n.DispatchJob(ctx, "k2", nil) },
		"StopJob":      func(n *Node) error { return n.StopJob(ctx, "k") },
		"NotifyWorker": func(n *Node) error { return n.NotifyWorker(ctx, "k", nil) },
		"JobKeys":      func(n *Node) error { _, err := n.JobKeys(ctx); return err },
		"Stats":        func(n *Node) error { _, err := n.Stats(ctx); return err },
		"AddWorker":    func(n *Node) error { _, err := n.AddWorker(ctx, newRecorder()); return err },
		"RemoveWorker": func(n *Node) error { return n.RemoveWorker(ctx, &Worker{node: n}) },
	}
	for name, call := range calls {
		for node, want := range map[string]struct {
			n   *Node
			err error
		}{"closed": {closed, ErrNodeClosed}, "shut down": {shut, ErrPoolShutdown}, "client after shutdown": {client, ErrPoolShutdown}} {
			t.Run(name+" on "+node, func(t *testing.T) {
				start := time.Now()
				err := call(want.n)
				assert.Less(t, time.Since(start), atOnce)
				if name == "RemoveWorker" {
					require.NoError(t, err, "removing a worker already gone is a no-op")
					return
				}
				if name == "AddWorker" && want.n == client {
					require.ErrorIs(t, err, ErrInvalidOption, "a client-only node hosts no workers")
					return
				}
				require.True(t, errors.Is(err, want.err), "got %v, want %v", err, want.err)
			})
		}
	}
	// Nothing of the pool survives, and no rejected call brought it back.
	assert.Empty(t, redistest.Keys(t, srv.Client(), shut.lay.space.Pattern()))
}
