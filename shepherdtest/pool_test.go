package shepherdtest_test

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/shepherd-go/shepherd/pool"
	"github.com/shepherd-go/shepherd/shepherdtest"
)

// jobs is a JobHandler that records the keys it runs.
type jobs struct {
	mu      sync.Mutex
	running map[string]string // key → payload
	stops   int
}

func newJobs() *jobs { return &jobs{running: map[string]string{}} }

func (j *jobs) Start(_ context.Context, job *pool.Job) error {
	j.mu.Lock()
	defer j.mu.Unlock()
	j.running[job.Key] = string(job.Payload)
	return nil
}

func (j *jobs) Stop(_ context.Context, key string) error {
	j.mu.Lock()
	defer j.mu.Unlock()
	delete(j.running, key)
	j.stops++
	return nil
}

func (j *jobs) snapshot() (map[string]string, int) {
	j.mu.Lock()
	defer j.mu.Unlock()
	out := map[string]string{}
	for k, v := range j.running {
		out[k] = v
	}
	return out, j.stops
}

// Jobs dispatched to a pool of two nodes run on one worker each; a
// stopped job is gone; the pool is shut down when the test ends.
func TestPoolRunsJobsByKey(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	rdb := shepherdtest.Redis(t)
	h := newJobs()
	t.Run("pool", func(t *testing.T) {
		p := shepherdtest.StartPool(t, rdb, "ingest", h, shepherdtest.WithNodes(2), shepherdtest.WithWorkers(2))
		require.Len(t, p.Nodes, 2)
		keys := []string{"a", "b", "c", "d", "e"}
		for _, k := range keys {
			require.NoError(t, p.Node().DispatchJob(ctx, k, []byte("payload-"+k)))
		}
		workers := map[string]bool{}
		for _, k := range keys {
			info := p.RequireRunning(t, k)
			assert.Equal(t, "payload-"+k, string(info.Payload))
			assert.NotEmpty(t, info.Node)
			workers[info.Worker] = true
		}
		assert.Greater(t, len(workers), 1, "five keys on four workers all landed on one")
		all := p.Jobs(t)
		require.Len(t, all, 5)
		for i, k := range keys {
			assert.Equal(t, k, all[i].Key)
		}

		require.NoError(t, p.Nodes[1].StopJob(ctx, "c"))
		p.RequireStopped(t, "c")
		p.RequireStopped(t, "never-dispatched")
		running, stops := h.snapshot()
		assert.NotContains(t, running, "c")
		assert.Equal(t, "payload-a", running["a"])
		assert.Equal(t, 1, stops)
	})
	// The pool was shut down: every job stopped, every key deleted.
	running, _ := h.snapshot()
	assert.Empty(t, running)
	exists, err := pool.Exists(ctx, rdb, "ingest")
	require.NoError(t, err)
	assert.False(t, exists)
}

// The assertions fail, saying what the pool says, when a job does not
// run or does not stop.
func TestPoolAssertionsFail(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	p := shepherdtest.StartPool(t, shepherdtest.Redis(t), "p", newJobs(), shepherdtest.WithNodes(1),
		shepherdtest.WithSettleTimeout(200*time.Millisecond))
	msg := fatalOf(t, func(tb testing.TB) { p.RequireRunning(tb, "nope") })
	assert.Contains(t, msg, `job "nope" of pool "p" is not running on exactly one worker`)
	assert.Contains(t, msg, "job not found")

	require.NoError(t, p.Node().DispatchJob(ctx, "k", nil))
	msg = fatalOf(t, func(tb testing.TB) { p.RequireStopped(tb, "k") })
	assert.Contains(t, msg, `job "k" of pool "p" is not stopped: state running`)
}

// A pool the test shut down itself is fine at cleanup.
func TestPoolShutDownByTheTest(t *testing.T) {
	t.Parallel()
	p := shepherdtest.StartPool(t, shepherdtest.Redis(t), "p", newJobs())
	require.NoError(t, p.Node().Shutdown(context.Background()))
}
