package main

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/shepherd-go/shepherd/internal/redistest"
	"github.com/shepherd-go/shepherd/pool"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// handler is a JobHandler that records notifications.
type handler struct {
	mu       sync.Mutex
	notified map[string]string
}

func (h *handler) Start(ctx context.Context, job *pool.Job) error { return nil }
func (h *handler) Stop(ctx context.Context, key string) error     { return nil }
func (h *handler) HandleNotification(ctx context.Context, key string, payload []byte) error {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.notified[key] = string(payload)
	return nil
}

// livePool starts a node with workers on a fresh pool and dispatches jobs.
func livePool(t *testing.T, workers, jobs int) (string, *pool.Node, *handler) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	name := redistest.Name(t)
	n, err := pool.AddNode(ctx, srv.Client(), name, pool.WithWorkerTTL(time.Second), pool.WithJobSinkBlockDuration(time.Second))
	require.NoError(t, err)
	t.Cleanup(func() { _ = n.Close(context.Background()) })
	h := &handler{notified: map[string]string{}}
	for i := 0; i < workers; i++ {
		_, err := n.AddWorker(ctx, h)
		require.NoError(t, err)
	}
	for i := 0; i < jobs; i++ {
		require.NoError(t, n.DispatchJob(ctx, "key-"+string(rune('a'+i)), nil))
	}
	return name, n, h
}

func TestStatusJSONMatchesThePool(t *testing.T) {
	t.Parallel()
	name, n, _ := livePool(t, 3, 9)
	var out, errOut bytes.Buffer
	require.Equal(t, exitOK, run([]string{"status", "-redis", srv.Addr(), "-pool", name, "-json"}, &out, &errOut), errOut.String())
	var st pool.Stats
	require.NoError(t, json.Unmarshal(out.Bytes(), &st))
	var ttl struct {
		MS float64 `json:"worker_ttl_ms"`
	}
	require.NoError(t, json.Unmarshal(out.Bytes(), &ttl))

	ctx := context.Background()
	keys, err := n.JobKeys(ctx)
	require.NoError(t, err)
	assert.Equal(t, name, st.Pool)
	assert.Equal(t, len(keys), st.Jobs)
	assert.Equal(t, 9, st.Running)
	assert.Empty(t, st.Orphans)
	assert.Zero(t, st.QueueDepth)
	require.Len(t, st.Nodes, 1)
	assert.Equal(t, n.ID(), st.Nodes[0].ID)
	assert.True(t, st.Nodes[0].Healthy)
	assert.Equal(t, 1000.0, ttl.MS, "the pool's own TTL, read from Redis")
	own, err := n.Stats(ctx)
	require.NoError(t, err)
	require.Len(t, st.Workers, len(own.Workers))
	var sum int
	for i, w := range own.Workers {
		assert.Equal(t, w.ID, st.Workers[i].ID)
		assert.Equal(t, w.Keys, st.Workers[i].Keys)
		assert.Equal(t, len(w.Keys), st.Workers[i].Jobs)
		assert.True(t, st.Workers[i].Healthy)
		sum += st.Workers[i].Jobs
	}
	assert.Equal(t, len(keys), sum)
}

func TestStatusTextAndWatch(t *testing.T) {
	t.Parallel()
	name, n, _ := livePool(t, 2, 3)
	var out, errOut bytes.Buffer
	require.Equal(t, exitOK, run([]string{"status", "-redis", srv.Addr(), "-pool", name}, &out, &errOut), errOut.String())
	s := out.String()
	assert.Contains(t, s, "pool "+name)
	assert.Contains(t, s, n.ID())
	assert.Contains(t, s, "workers: 2")
	assert.Contains(t, s, "queue: 0 waiting, 0 pending")
	assert.Contains(t, s, "jobs: 3 total, 3 running, 0 without a live owner")
	assert.Contains(t, s, "since the pool began: 3 starts ok, 0 starts failed, 0 jobs recovered")
	host, _ := os.Hostname()
	assert.Regexp(t, regexp.QuoteMeta(host)+` +`+strconv.Itoa(os.Getpid())+` `, s, "the node's host and PID")

	out.Reset()
	require.Equal(t, exitOK, run([]string{"status", "-redis", srv.Addr(), "-pool", name, "-json",
		"-watch", "-interval", "10ms", "-count", "3"}, &out, &errOut), errOut.String())
	lines := strings.Split(strings.TrimSpace(out.String()), "\n")
	assert.Len(t, lines, 3, "one snapshot per refresh")
}

func TestWrappers(t *testing.T) {
	t.Parallel()
	name, n, h := livePool(t, 2, 0)
	cli := func(stdinText string, args ...string) (int, string, string) {
		var out, errOut bytes.Buffer
		return runWithStdin(stdinText, append([]string{args[0], "-redis", srv.Addr(), "-pool", name}, args[1:]...), &out, &errOut), out.String(), errOut.String()
	}
	code, out, errOut := cli("", "dispatch", "-payload", "hi", "a", "b")
	require.Equal(t, exitOK, code, errOut)
	assert.Equal(t, "a started\nb started\n", out)

	code, out, errOut = cli("", "dispatch", "a")
	assert.Equal(t, exitError, code)
	assert.Contains(t, errOut, "already exists")

	code, out, errOut = cli("", "jobs", "-json")
	require.Equal(t, exitOK, code, errOut)
	var rows []jobRow
	require.NoError(t, json.Unmarshal([]byte(out), &rows))
	require.Len(t, rows, 2)
	st, err := n.Stats(context.Background())
	require.NoError(t, err)
	for _, r := range rows {
		found := false
		for _, w := range st.Workers {
			if w.ID == r.Worker {
				assert.Contains(t, w.Keys, r.Key)
				found = true
			}
		}
		assert.True(t, found, "job %s has a worker", r.Key)
	}

	code, _, errOut = cli("", "notify", "-payload", "reload", "a")
	require.Equal(t, exitOK, code, errOut)
	h.mu.Lock()
	assert.Equal(t, "reload", h.notified["a"])
	h.mu.Unlock()

	code, _, errOut = cli("n\n", "stop", "a")
	assert.Equal(t, exitError, code)
	assert.Contains(t, errOut, "not confirmed")
	code, out, errOut = cli("y\n", "stop", "a")
	require.Equal(t, exitOK, code, errOut)
	assert.Equal(t, "a stopped\n", out)
	keys, err := n.JobKeys(context.Background())
	require.NoError(t, err)
	assert.Equal(t, []string{"b"}, keys)

	code, _, errOut = cli("", "shutdown")
	assert.Equal(t, exitError, code, "no confirmation on empty stdin")
	assert.Contains(t, errOut, "not confirmed")
	code, out, errOut = cli("", "shutdown", "-yes")
	require.Equal(t, exitOK, code, errOut)
	assert.Contains(t, out, "shut down")
	select {
	case <-n.Done():
	case <-time.After(10 * time.Second):
		t.Fatal("the node did not close with the pool")
	}
	left, err := srv.Client().Keys(context.Background(), "shepherd:{"+name+"}:*").Result()
	require.NoError(t, err)
	assert.Empty(t, left)
}

// stdinMu serializes the tests that replace stdin.
var stdinMu sync.Mutex

func runWithStdin(text string, args []string, stdout, stderr *bytes.Buffer) int {
	stdinMu.Lock()
	defer stdinMu.Unlock()
	stdin = strings.NewReader(text)
	return run(args, stdout, stderr)
}

// On a pool of several shards, status adds the shards up and says how
// many there are; the CLI's own calls (a client-only node) reach every
// key's shard.
func TestStatusOfAShardedPool(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	name := redistest.Name(t)
	n, err := pool.AddNode(ctx, srv.NewClient(), name, pool.WithShards(3), pool.WithWorkerTTL(time.Second), pool.WithJobSinkBlockDuration(time.Second))
	require.NoError(t, err)
	t.Cleanup(func() { _ = n.Close(context.Background()) })
	_, err = n.AddWorker(ctx, &handler{notified: map[string]string{}})
	require.NoError(t, err)
	var out, errOut bytes.Buffer
	args := []string{"dispatch", "-redis", srv.Addr(), "-pool", name}
	for i := range 9 {
		args = append(args, "key-"+strconv.Itoa(i))
	}
	require.Equal(t, exitOK, run(args, &out, &errOut), errOut.String())

	out.Reset()
	require.Equal(t, exitOK, run([]string{"status", "-redis", srv.Addr(), "-pool", name}, &out, &errOut), errOut.String())
	assert.Contains(t, out.String(), "3 shards")
	assert.Contains(t, out.String(), "jobs: 9 total, 9 running, 0 without a live owner")
	out.Reset()
	require.Equal(t, exitOK, run([]string{"status", "-redis", srv.Addr(), "-pool", name, "-json"}, &out, &errOut), errOut.String())
	var st pool.Stats
	require.NoError(t, json.Unmarshal(out.Bytes(), &st))
	assert.Equal(t, 3, st.Shards)
	assert.Equal(t, 9, st.Running)
	require.Len(t, st.Workers, 1)
	assert.Equal(t, 9, st.Workers[0].Jobs)
}

// TestStatusOfALargePool: a pool of more than 2,000 jobs is read from its
// workers' reports (pool.Summary) by default, and says so; -exact reads
// every record. Both count the same jobs once the workers reported.
func TestStatusOfALargePool(t *testing.T) {
	t.Parallel()
	const total = 2600
	name, n, _ := livePool(t, 3, 0)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	var wg sync.WaitGroup
	for p := range 32 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := p; i < total; i += 32 {
				assert.NoError(t, n.DispatchJob(ctx, "dev-"+strconv.Itoa(10000+i), nil))
			}
		}()
	}
	wg.Wait()
	exactNow, err := pool.Inspect(ctx, srv.Client(), name)
	require.NoError(t, err)
	// A worker's report is as old as its last keep-alive, and names the
	// keys of an earlier moment when its loop was too busy to answer the
	// keep-alive at once (pool/report.go): wait for both, as dashboard's
	// TestViewsOfALargePool does.
	require.Eventually(t, func() bool {
		st, err := pool.Summary(ctx, srv.Client(), name)
		if err != nil || st.Running != total || len(st.Workers) != len(exactNow.Workers) {
			return false
		}
		for i, w := range exactNow.Workers {
			if !slices.Equal(st.Workers[i].Keys, w.Keys[:8]) {
				return false
			}
		}
		return true
	}, 30*time.Second, 50*time.Millisecond, "the workers report their jobs")

	var out, errOut bytes.Buffer
	require.Equal(t, exitOK, run([]string{"status", "-redis", srv.Addr(), "-pool", name}, &out, &errOut), errOut.String())
	s := out.String()
	assert.Contains(t, s, "jobs: 2600 total, 2600 running, 0 without a live owner")
	assert.Contains(t, s, "as the workers reported them at their last keep-alive")
	assert.Equal(t, 3, strings.Count(s, " ...\n"), "each worker's first keys, and more")

	var sampled, exact pool.Stats
	for _, c := range []struct {
		st   *pool.Stats
		args []string
	}{{&sampled, nil}, {&exact, []string{"-exact"}}} {
		out.Reset()
		args := append([]string{"status", "-redis", srv.Addr(), "-pool", name, "-json"}, c.args...)
		require.Equal(t, exitOK, run(args, &out, &errOut), errOut.String())
		require.NoError(t, json.Unmarshal(out.Bytes(), c.st))
	}
	assert.True(t, sampled.Sampled)
	assert.False(t, exact.Sampled)
	require.Len(t, sampled.Workers, 3)
	for i, w := range exact.Workers {
		assert.Equal(t, w.Jobs, sampled.Workers[i].Jobs)
		assert.Len(t, w.Keys, w.Jobs, "-exact: every key")
		assert.Equal(t, w.Keys[:8], sampled.Workers[i].Keys)
	}
}
