package pool

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/shepherd-go/shepherd/internal/redistest"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// A worker declared dead stops its stale copies after another worker of
// its node may have been handed the key back. With one handler for both,
// as most users write it, a Stop by key would stop the fresh run. The fence stops the stale run before the fresh Start and
// skips the stale worker's later Stop.
func TestStaleStopSparesTheFreshRun(t *testing.T) {
	t.Parallel()
	rec := newRecorder()
	n := addNode(t, srv.NewClient(), redistest.Name(t))
	ws := addWorkers(t, n, rec, 2)
	ctx := testCtx(t, 10*time.Second)
	const key = "fenced" // never dispatched: only these calls touch it

	require.NoError(t, ws[0].startRun(ctx, &Job{Key: key}, 1))
	require.NoError(t, ws[1].startRun(ctx, &Job{Key: key}, 3)) // handed back to the other worker
	assert.Equal(t, int64(1), n.test.staleRunsStopped.Load(), "the stale run is stopped before the fresh Start")
	assert.Equal(t, map[string]int{key: 1}, rec.runningKeys())

	require.NoError(t, ws[0].stopRun(ctx, key, 1)) // the thawed worker's cleanup
	assert.Equal(t, map[string]int{key: 1}, rec.runningKeys(), "the stale Stop stopped the fresh run")
	rec.mu.Lock()
	assert.Equal(t, 1, rec.stops[key], "the stale run's Stop ran twice")
	rec.mu.Unlock()

	require.NoError(t, ws[1].stopRun(ctx, key, 3))
	assert.Empty(t, rec.runningKeys())
	n.runs.mu.Lock()
	assert.Empty(t, n.runs.keys, "a stopped key is forgotten")
	n.runs.mu.Unlock()
}

// orderHandler logs its calls and blocks the Stop of one key until told.
type orderHandler struct {
	mu      sync.Mutex
	calls   []string
	blocked chan struct{} // closed by the test: the blocked Stop returns
	entered chan struct{} // closed when the blocked Stop began
}

func (h *orderHandler) Start(ctx context.Context, job *Job) error {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.calls = append(h.calls, "start")
	return nil
}

func (h *orderHandler) Stop(ctx context.Context, key string) error {
	close(h.entered)
	<-h.blocked // ignores ctx, as a stuck handler would
	h.mu.Lock()
	defer h.mu.Unlock()
	h.calls = append(h.calls, "stop")
	return nil
}

// A handler never runs two calls of one key at once, across the workers
// of a node: a Start of the key on another worker waits for a Stop that
// still runs, even one that outlived its deadline.
func TestStartWaitsForAStopOfItsKeyOnAnotherWorker(t *testing.T) {
	t.Parallel()
	h := &orderHandler{blocked: make(chan struct{}), entered: make(chan struct{})}
	n := addNode(t, srv.NewClient(), redistest.Name(t))
	ws := addWorkers(t, n, h, 2)
	ctx := testCtx(t, 10*time.Second)
	const key = "one-at-a-time"
	require.NoError(t, ws[0].startRun(ctx, &Job{Key: key}, 1))

	sctx, cancel := context.WithTimeout(ctx, 50*time.Millisecond)
	defer cancel()
	stopped := make(chan error, 1)
	go func() { stopped <- ws[0].stopRun(sctx, key, 1) }()
	<-h.entered
	require.ErrorIs(t, <-stopped, context.DeadlineExceeded, "the stuck Stop outlives its deadline")

	started := make(chan error, 1)
	go func() { started <- ws[1].startRun(ctx, &Job{Key: key}, 2) }()
	time.Sleep(50 * time.Millisecond) // room for a Start that does not wait to run (the failure)
	close(h.blocked)
	require.NoError(t, <-started)
	h.mu.Lock()
	defer h.mu.Unlock()
	assert.Equal(t, []string{"start", "stop", "start"}, h.calls)
	assert.Zero(t, n.test.staleRunsStopped.Load(), "the run was stopped (late), not stale")
}
