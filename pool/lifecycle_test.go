package pool

import (
	"context"
	"testing"
	"time"

	"github.com/shepherd-go/shepherd/internal/redistest"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// poolKeys lists the Redis keys of pool on the shared server.
func poolKeys(t *testing.T, n *Node) []string {
	t.Helper()
	keys, err := srv.Client().Keys(testCtx(t, 5*time.Second), n.lay.space.Pattern()).Result()
	require.NoError(t, err)
	return keys
}

func TestShutdownStopsEveryJobOnEveryNodeAndDeletesAllKeys(t *testing.T) {
	t.Parallel()
	pool := redistest.Name(t)
	n1 := addNode(t, srv.Client(), pool)
	n2 := addNode(t, srv.NewClient(), pool)
	client := addNode(t, srv.NewClient(), pool, WithClientOnly())
	r1, r2 := newRecorder(), newRecorder()
	addWorkers(t, n1, r1, 2)
	addWorkers(t, n2, r2, 2)
	dispatchN(t, client, 100)
	require.Contains(t, poolKeys(t, n1), n1.lay.counters, "the counters are among the keys to delete")

	require.NoError(t, client.Shutdown(testCtx(t, 30*time.Second)))
	assert.Empty(t, union(r1, r2), "every job was stopped")
	assert.Empty(t, poolKeys(t, n1), "no key of the pool is left")
	require.NoError(t, client.Shutdown(context.Background()), "Shutdown is idempotent")

	// Every node learned of the shutdown and closed.
	for _, n := range []*Node{n1, n2} {
		require.Eventually(t, func() bool {
			return n.DispatchJob(context.Background(), "x", nil) == ErrPoolShutdown
		}, 10*time.Second, 20*time.Millisecond)
		require.NoError(t, n.Close(context.Background()))
	}
	assert.Empty(t, poolKeys(t, n1), "closing after shutdown resurrects nothing")

	// The pool name can be used again afterwards.
	n3 := addNode(t, srv.Client(), pool)
	r3 := newRecorder()
	addWorkers(t, n3, r3, 1)
	require.NoError(t, n3.DispatchJob(testCtx(t, 10*time.Second), "again", nil))
}

func TestAddNodeDuringShutdownFails(t *testing.T) {
	t.Parallel()
	pool := redistest.Name(t)
	n1 := addNode(t, srv.Client(), pool)
	// Set the flag as Shutdown's first step does, without finishing.
	_, err := n1.shutdown.Set(testCtx(t, 5*time.Second), shutdownFlag, "test")
	require.NoError(t, err)
	_, err = AddNode(testCtx(t, 5*time.Second), srv.Client(), pool, fastOpts()...)
	assert.ErrorIs(t, err, ErrPoolShutdown)
	require.Eventually(t, func() bool {
		return n1.DispatchJob(context.Background(), "x", nil) == ErrPoolShutdown
	}, 10*time.Second, 20*time.Millisecond)
}

// Every lifecycle call on every kind of node, twice.
func TestLifecycleCallsOnEveryKindOfNodeTwice(t *testing.T) {
	t.Parallel()
	for _, clientOnly := range []bool{false, true} {
		pool := redistest.Name(t)
		var opts []NodeOption
		if clientOnly {
			opts = append(opts, WithClientOnly())
		}
		n := addNode(t, srv.Client(), pool, opts...)
		ctx := testCtx(t, 20*time.Second)
		if clientOnly {
			_, err := n.AddWorker(ctx, newRecorder())
			assert.ErrorIs(t, err, ErrInvalidOption, "a client-only node hosts no workers")
		}
		require.NoError(t, n.Close(ctx))
		require.NoError(t, n.Close(ctx))
		assert.ErrorIs(t, n.DispatchJob(ctx, "k", nil), ErrNodeClosed)
		assert.ErrorIs(t, n.StopJob(ctx, "k"), ErrNodeClosed)
		assert.ErrorIs(t, n.NotifyWorker(ctx, "k", nil), ErrNodeClosed)
		_, err := n.AddWorker(ctx, newRecorder())
		assert.Error(t, err)
		_, err = n.JobKeys(ctx)
		assert.ErrorIs(t, err, ErrNodeClosed)
		assert.ErrorIs(t, n.Shutdown(ctx), ErrNodeClosed)

		m := addNode(t, srv.Client(), pool, opts...)
		require.NoError(t, m.Shutdown(ctx))
		require.NoError(t, m.Shutdown(ctx))
		require.NoError(t, m.Close(ctx))
		assert.ErrorIs(t, m.DispatchJob(ctx, "k", nil), ErrPoolShutdown)
		assert.Empty(t, poolKeys(t, m))
	}
}

func TestClientOnlyNodeDispatchesStopsAndNotifies(t *testing.T) {
	t.Parallel()
	pool := redistest.Name(t)
	full := addNode(t, srv.Client(), pool)
	rec := newRecorder()
	addWorkers(t, full, rec, 1)
	client := addNode(t, srv.NewClient(), pool, WithClientOnly())
	ctx := testCtx(t, 20*time.Second)
	require.NoError(t, client.DispatchJob(ctx, "k", []byte("v")))
	require.NoError(t, client.NotifyWorker(ctx, "k", []byte("n")))
	require.NoError(t, client.StopJob(ctx, "k"))
	assert.Empty(t, rec.runningKeys())
	st, err := client.Stats(ctx)
	require.NoError(t, err)
	require.Len(t, st.Workers, 1)
	assert.Equal(t, full.ID(), st.Workers[0].Node)
	assert.True(t, st.Workers[0].Healthy)
}

func TestStatsReportsWorkersKeysAndHealth(t *testing.T) {
	t.Parallel()
	n := addNode(t, srv.Client(), redistest.Name(t))
	ws := addWorkers(t, n, newRecorder(), 2)
	dispatchN(t, n, 20)
	st, err := n.Stats(testCtx(t, 5*time.Second))
	require.NoError(t, err)
	require.Len(t, st.Workers, 2)
	total := 0
	for i, wi := range st.Workers {
		assert.Equal(t, i, wi.Slot)
		assert.True(t, wi.Healthy)
		assert.Equal(t, n.ID(), wi.Node)
		total += len(wi.Keys)
	}
	assert.Equal(t, 20, total)
	assert.ElementsMatch(t, []string{ws[0].ID(), ws[1].ID()}, []string{st.Workers[0].ID, st.Workers[1].ID})
}

// stuck is a handler whose Stop never returns.
type stuck struct{ release chan struct{} }

func (stuck) Start(context.Context, *Job) error { return nil }
func (s stuck) Stop(context.Context, string) error {
	<-s.release
	return nil
}

func TestCloseIsBoundedByWorkerShutdownTTL(t *testing.T) {
	t.Parallel()
	pool := redistest.Name(t)
	n := addNode(t, srv.Client(), pool, WithWorkerShutdownTTL(300*time.Millisecond))
	h := stuck{release: make(chan struct{})}
	defer close(h.release) // let the abandoned Stop goroutine end before goleak looks
	addWorkers(t, n, h, 1)
	require.NoError(t, n.DispatchJob(testCtx(t, 10*time.Second), "k", nil))
	done := make(chan error, 1)
	go func() { done <- n.Close(context.Background()) }()
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		t.Fatal("Close waits for a Stop handler that never returns")
	}
	// The job was handed over all the same: it waits for the next worker.
	other := addNode(t, srv.NewClient(), pool)
	keys, err := other.JobKeys(testCtx(t, 5*time.Second))
	require.NoError(t, err)
	assert.Equal(t, []string{"k"}, keys)
}
