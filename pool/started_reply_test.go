package pool

import (
	"context"
	"testing"
	"time"

	"github.com/shepherd-go/shepherd/internal/redistest"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// gatedHandler blocks Start until release is closed.
type gatedHandler struct {
	started chan string
	release chan struct{}
	stopped chan string
}

func (h *gatedHandler) Start(ctx context.Context, job *Job) error {
	h.started <- job.Key
	select {
	case <-h.release:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

func (h *gatedHandler) Stop(_ context.Context, key string) error {
	h.stopped <- key
	return nil
}

// A StopJob that arrives while Start runs makes startedScript answer
// "STOPPING": the DispatchJob waiting for that Start must still get its
// answer (Start succeeded), and the stop then completes.
func TestDispatchAnsweredWhenStopArrivesDuringStart(t *testing.T) {
	t.Parallel()
	ctx := testCtx(t, 20*time.Second)
	n := addNode(t, srv.Client(), redistest.Name(t))
	h := &gatedHandler{started: make(chan string, 1), release: make(chan struct{}), stopped: make(chan string, 1)}
	addWorkers(t, n, h, 1)

	dispatched := make(chan error, 1)
	go func() { dispatched <- n.DispatchJob(ctx, "k", []byte("p")) }()
	select {
	case <-h.started:
	case <-ctx.Done():
		t.Fatal("Start never ran")
	}
	stopped := make(chan error, 1)
	go func() { stopped <- n.StopJob(ctx, "k") }()
	// Release Start only once the stop is recorded ("x"), so that
	// startedScript sees it.
	require.Eventually(t, func() bool { return recordState(ctx, n, "k") == "x" }, 10*time.Second, 5*time.Millisecond)
	close(h.release)

	select {
	case err := <-dispatched:
		assert.NoError(t, err, "Start succeeded: DispatchJob returns nil")
	case <-ctx.Done():
		t.Fatal("DispatchJob got no answer")
	}
	select {
	case err := <-stopped:
		assert.NoError(t, err)
	case <-ctx.Done():
		t.Fatal("StopJob got no answer")
	}
	assert.Equal(t, "k", <-h.stopped)
}
