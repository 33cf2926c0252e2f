package queue

import (
	"context"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/shepherd-go/shepherd/internal/redistest"
	"github.com/shepherd-go/shepherd/internal/testlog"
)

// replicated starts a private primary with one replica and opens a queue
// on the primary with WithReplicas(1, timeout).
func replicated(t *testing.T, timeout time.Duration, opts ...Option) (q *Queue, primary, repl *redistest.Server) {
	t.Helper()
	primary = redistest.Start(t)
	repl = redistest.StartReplicaOf(t, primary)
	q, err := Open(testCtx(t, 10*time.Second), primary.Client(), redistest.Name(t),
		append([]Option{WithReplicas(1, timeout)}, opts...)...)
	require.NoError(t, err)
	t.Cleanup(func() { _ = repl.Thaw(); require.NoError(t, closeWithin(q)) })
	return q, primary, repl
}

func TestWithReplicasRefusesBadValues(t *testing.T) {
	t.Parallel()
	ctx := testCtx(t, 10*time.Second)
	for _, opts := range [][]Option{
		{WithReplicas(-1, time.Second)},
		{WithReplicas(1, 0)},
		{WithReplicas(1, -time.Second)},
		{WithReplicas(1, 5*time.Second)}, // not shorter than the call timeout (5s)
		{WithCallTimeout(time.Second), WithReplicas(1, 2*time.Second)},
	} {
		_, err := Open(ctx, srv.Client(), redistest.Name(t), opts...)
		assert.ErrorIs(t, err, ErrInvalidOption)
	}
	q := open(t, redistest.Name(t), WithReplicas(0, 0)) // none asked: today's behaviour
	_, err := q.Submit(ctx, []byte("x"))
	require.NoError(t, err)
}

func TestASubmitReturnsOnceReplicated(t *testing.T) {
	t.Parallel()
	ctx := testCtx(t, 20*time.Second)
	q, _, repl := replicated(t, time.Second)
	f, err := q.Submit(ctx, []byte("p"))
	require.NoError(t, err)
	// Read the replica at once: a Submit that returned nil is there.
	assert.NotEmpty(t, storedTask(t, ctx, repl.Client(), q.lay, f.ID()), "the replica has the task")

	serve(t, q, echo)
	res, err := wait(t, f, 10*time.Second)
	require.NoError(t, err)
	assert.Equal(t, "p#1", string(res))
	assert.Equal(t, "done", storedTask(t, ctx, repl.Client(), q.lay, f.ID())[fieldState],
		"a future completes once its outcome is on the replica")
}

func TestASubmitNotReplicatedFailsAndIsWithdrawn(t *testing.T) {
	t.Parallel()
	ctx := testCtx(t, 20*time.Second)
	q, primary, repl := replicated(t, time.Second) // not less: the Submit after the thaw must not time out on a loaded machine
	require.NoError(t, repl.Freeze())
	_, err := q.Submit(ctx, []byte("p"), WithTaskID("t1"))
	require.ErrorIs(t, err, ErrNotReplicated)
	assert.ErrorContains(t, err, "0 of 1 replicas acknowledged the writes within 1s")
	// The Submit failed: its task is withdrawn from the master, and the
	// same id may be submitted again.
	require.Eventually(t, func() bool {
		return len(storedTask(t, ctx, primary.Client(), q.lay, "t1")) == 0
	}, 10*time.Second, 10*time.Millisecond, "the task was not withdrawn")
	require.NoError(t, repl.Thaw())
	f, err := q.Submit(ctx, []byte("p"), WithTaskID("t1"))
	require.NoError(t, err)
	serve(t, q, echo)
	_, err = wait(t, f, 10*time.Second)
	require.NoError(t, err)
}

func TestAFutureWaitsUntilItsOutcomeIsReplicated(t *testing.T) {
	t.Parallel()
	ctx := testCtx(t, 30*time.Second)
	q, primary, repl := replicated(t, time.Second) // the first Submit's WAIT must not time out on a loaded machine
	release, free := gate(t)
	serve(t, q, func(ctx context.Context, task *Task) ([]byte, error) {
		<-release
		return []byte("r"), nil
	})
	f, err := q.Submit(ctx, []byte("p"))
	require.NoError(t, err)
	require.NoError(t, repl.Freeze())
	free()
	// The outcome is on the master, and its message came; the replica,
	// frozen, does not have it: the future waits.
	require.Eventually(t, func() bool {
		return storedTask(t, ctx, primary.Client(), q.lay, f.ID())[fieldState] == "done"
	}, 10*time.Second, 5*time.Millisecond)
	deadline := time.After(1500 * time.Millisecond) // past the message and a poll
	select {
	case <-f.Done():
		t.Fatal("the future completed with an outcome the replica did not have")
	case <-deadline:
	}
	_, err = q.Result(ctx, f.ID())
	require.ErrorIs(t, err, ErrNotReplicated, "Result does not return an outcome the replica does not have")
	require.NoError(t, repl.Thaw())
	res, err := wait(t, f, 10*time.Second)
	require.NoError(t, err)
	assert.Equal(t, "r", string(res))
	res, err = q.Result(ctx, f.ID())
	require.NoError(t, err)
	assert.Equal(t, "r", string(res))
}

func TestRedisRestartIsReported(t *testing.T) {
	t.Parallel()
	ctx := testCtx(t, 30*time.Second)
	s := redistest.Start(t, redistest.WithAOF())
	logs := &testlog.Buffer{}
	reader, mp := manualMeter(t)
	q, err := Open(ctx, s.Client(), redistest.Name(t), WithLogger(slog.New(slog.NewTextHandler(logs, nil))), WithMeterProvider(mp))
	require.NoError(t, err)
	t.Cleanup(func() { _ = closeWithin(q) })
	require.Eventually(t, q.watched.Load, 10*time.Second, 10*time.Millisecond, "the watcher never read Redis")
	require.NoError(t, s.Restart())
	require.Eventually(t, func() bool { return strings.Contains(logs.String(), "Redis restarted") }, 10*time.Second,
		10*time.Millisecond, "no log of the restart: %s", logs)
	assert.NotContains(t, logs.String(), "level=ERROR", "a restart of a server without replicas is a WARN")
	assert.Equal(t, float64(1), collect(t, reader)[MetricFailovers], "the metric counts it")
}

func TestAttemptsRedisNoLongerHoldsEndAfterAFailover(t *testing.T) {
	t.Parallel()
	ctx := testCtx(t, 20*time.Second)
	q := open(t, redistest.Name(t))
	started := make(chan string, 2)
	ended := make(chan string, 2)
	release := make(chan struct{})
	defer close(release)
	s := serve(t, q, func(ctx context.Context, task *Task) ([]byte, error) {
		started <- task.ID
		select {
		case <-ctx.Done():
		case <-release:
		}
		ended <- task.ID
		return nil, ctx.Err()
	}, WithWorkers(2), WithPrefetch(0))
	_, err := q.Submit(ctx, []byte("a"), WithTaskID("a"))
	require.NoError(t, err)
	_, err = q.Submit(ctx, []byte("b"), WithTaskID("b"))
	require.NoError(t, err)
	awaitSignal(t, started, "started")
	awaitSignal(t, started, "started")
	// As if a failover lost the take of a: the new master holds it as
	// nobody's.
	require.NoError(t, srv.Client().HDel(ctx, q.lay.active, "a").Err())
	assert.Equal(t, 1, s.reconcileRunning(ctx))
	select {
	case id := <-ended:
		assert.Equal(t, "a", id, "the attempt Redis does not hold ends; the other goes on")
	case <-time.After(5 * time.Second):
		t.Fatal("the attempt Redis no longer holds was not ended")
	}
	assert.Zero(t, s.reconcileRunning(ctx), "b is still this process's")
}
