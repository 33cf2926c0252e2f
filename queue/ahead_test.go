package queue

import (
	"context"
	"fmt"
	"log/slog"
	"regexp"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/shepherd-go/shepherd/internal/redistest"
	"github.com/shepherd-go/shepherd/internal/testlog"
)

// submitAll submits n tasks with payload prefix+i from 16 goroutines and
// returns their futures in order.
func submitAll(t *testing.T, ctx context.Context, q *Queue, prefix string, n int) []*Future {
	t.Helper()
	fs := make([]*Future, n)
	var wg sync.WaitGroup
	errs := make(chan error, n)
	for g := range 16 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := g; i < n; i += 16 {
				f, err := q.Submit(ctx, fmt.Appendf(nil, "%s%d", prefix, i))
				if err != nil {
					errs <- err
					return
				}
				fs[i] = f
			}
		}()
	}
	wg.Wait()
	close(errs)
	require.NoError(t, <-errs)
	return fs
}

// TestShortTasksAreTakenAheadInBatches: with a backlog of short tasks, a
// process takes ahead on its own, so that its calls each record and take
// far more tasks than its workers; WithPrefetch(0) turns that off.
func TestShortTasksAreTakenAheadInBatches(t *testing.T) {
	t.Parallel()
	const n = 3000
	for _, c := range []struct {
		name string
		opts []ServeOption
		ok   func(perCall float64) bool
	}{
		// 4 workers, 32 ahead at most: up to 36 ends and 36 takes a call.
		{"by default", nil, func(perCall float64) bool { return perCall > 10 }},
		// Never more than the 4 workers: at most 4 ends and 4 takes.
		{"WithPrefetch(0)", []ServeOption{WithPrefetch(0)}, func(perCall float64) bool { return perCall <= 4 }},
	} {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			ctx := testCtx(t, 60*time.Second)
			name := redistest.Name(t)
			fs := submitAll(t, ctx, open(t, name), "", n)
			sc := newScriptCounter()
			rdb := srv.NewClient()
			rdb.AddHook(sc)
			q, err := Open(ctx, rdb, name)
			require.NoError(t, err)
			t.Cleanup(func() { _ = closeWithin(q); _ = rdb.Close() })
			serve(t, q, echo, append([]ServeOption{WithWorkers(4)}, c.opts...)...)
			for _, f := range fs {
				_, err := wait(t, f, 30*time.Second)
				require.NoError(t, err)
			}
			sc.mu.Lock()
			calls := sc.calls["complete"] + sc.calls["dequeue"]
			sc.mu.Unlock()
			perCall := float64(n) / float64(calls)
			t.Logf("%d tasks in %d record-and-take calls: %.1f a call", n, calls, perCall)
			assert.True(t, c.ok(perCall), "%.1f tasks a call", perCall)
		})
	}
}

// TestLongTasksAreNotTakenAhead: tasks of 20 ms are not taken ahead (2
// workers end fewer than one in aheadHorizon), however long the backlog:
// the process never holds more tasks than its workers.
func TestLongTasksAreNotTakenAhead(t *testing.T) {
	t.Parallel()
	ctx := testCtx(t, 30*time.Second)
	q := open(t, redistest.Name(t))
	fs := submitAll(t, ctx, q, "", 60)
	var most atomic.Int64
	done := make(chan struct{})
	go func() {
		defer close(done)
		for ctx.Err() == nil {
			st, err := q.Stats(ctx)
			if err == nil && st.InFlight > most.Load() {
				most.Store(st.InFlight)
			}
			if err == nil && st.Available == 0 && st.InFlight == 0 {
				return
			}
			time.Sleep(2 * time.Millisecond)
		}
	}()
	serve(t, q, func(ctx context.Context, t *Task) ([]byte, error) {
		time.Sleep(20 * time.Millisecond) // the task's work
		return echo(ctx, t)
	}, WithWorkers(2))
	for _, f := range fs {
		_, err := wait(t, f, 20*time.Second)
		require.NoError(t, err)
	}
	awaitSignal(t, done, "done")
	assert.LessOrEqual(t, most.Load(), int64(2), "a process with 2 workers held more tasks than its workers")
	assert.Positive(t, most.Load())
}

// TestTasksTakenAheadGoBackWhenEveryWorkerIsBusy: a process that took
// short tasks ahead and whose only worker then runs a long one gives the
// tasks it holds back after maxHeld, no attempt used; another process
// runs them meanwhile.
func TestTasksTakenAheadGoBackWhenEveryWorkerIsBusy(t *testing.T) {
	t.Parallel()
	ctx := testCtx(t, 30*time.Second)
	name := redistest.Name(t)
	logs := &testlog.Buffer{}
	reader, mp := manualMeter(t)
	q := open(t, name, WithLogger(slog.New(slog.NewTextHandler(logs, &slog.HandlerOptions{Level: slog.LevelDebug}))), WithMeterProvider(mp))
	b := newBlocker()
	defer close(b.release)
	first, after := behindALongTask(t, ctx, q, b)
	// Taken ahead while its worker runs "block", and given back once
	// they waited maxHeld.
	gaveBack := regexp.MustCompile(`gave back tasks taken ahead.* tasks=([1-9][0-9]*)`)
	require.Eventually(t, func() bool { return gaveBack.MatchString(logs.String()) }, 5*time.Second, time.Millisecond,
		"no task taken ahead was given back")
	inFlight(t, q, 1)
	n, _ := strconv.Atoi(gaveBack.FindStringSubmatch(logs.String())[1])
	assert.Equal(t, float64(n), collect(t, reader)[MetricAheadGivenBack], "the metric counts the tasks given back")

	serve(t, open(t, name), echo, WithWorkers(1))
	ranOnFirstAttempt(t, after) // elsewhere
	select {
	case <-first.Done():
		t.Fatal("the long task ended before its release")
	default:
	}
}

// TestPauseGivesBackTasksTakenAhead: tasks a process took ahead and has
// not started go back when the queue is paused, so none starts during
// the pause, not even once the long task that held its worker ends; all
// run after Resume, no attempt used.
func TestPauseGivesBackTasksTakenAhead(t *testing.T) {
	t.Parallel()
	ctx := testCtx(t, 30*time.Second)
	q := open(t, redistest.Name(t))
	b := newBlocker()
	// Held for as long as the worker is busy: only the pause gives them
	// back.
	first, after := behindALongTask(t, ctx, q, b, withMaxHeld(time.Hour))
	require.Eventually(t, func() bool {
		st, err := q.Stats(ctx)
		return err == nil && st.InFlight > 1
	}, 5*time.Second, time.Millisecond, "nothing was taken ahead while the worker ran the long task")
	require.NoError(t, q.Pause(ctx))
	inFlight(t, q, 1) // the long task's: the others went back
	close(b.release)
	_, err := wait(t, first, 5*time.Second)
	require.NoError(t, err)
	time.Sleep(quiet) // a task taken ahead would start now
	for _, p := range b.saw() {
		assert.NotEqual(t, "t", p[:1], "a task taken ahead started during the pause: %q", p)
	}

	require.NoError(t, q.Resume(ctx))
	ranOnFirstAttempt(t, after)
}

// behindALongTask queues 20 short tasks, a long one ("block", held by b)
// and 20 short ones more ("t0"...), serves q with one worker (and opts),
// and returns once the long task runs and the tasks before it are done:
// the process then takes some of the "t" tasks ahead, its worker busy.
func behindALongTask(t *testing.T, ctx context.Context, q *Queue, b *blocker, opts ...ServeOption) (long *Future, after []*Future) {
	t.Helper()
	before := submitAll(t, ctx, q, "s", 20)
	long, err := q.Submit(ctx, []byte("block"))
	require.NoError(t, err)
	after = submitAll(t, ctx, q, "t", 20)
	serve(t, q, b.handle, append([]ServeOption{WithWorkers(1)}, opts...)...)
	<-b.started
	for _, f := range before {
		_, err := wait(t, f, 5*time.Second)
		require.NoError(t, err)
	}
	return long, after
}

// ranOnFirstAttempt waits for the "t" tasks of behindALongTask: each ran
// once, on its first attempt (a task given back uses none).
func ranOnFirstAttempt(t *testing.T, fs []*Future) {
	t.Helper()
	for i, f := range fs {
		res, err := wait(t, f, 10*time.Second)
		require.NoError(t, err)
		assert.Equal(t, fmt.Sprintf("t%d#1", i), string(res), "a task given back used an attempt")
	}
}

// withMaxHeld sets how long tasks taken ahead wait with no worker picking
// one before they go back (maxHeld).
func withMaxHeld(d time.Duration) ServeOption {
	return func(c *serveConfig) error {
		c.maxHeld = d
		return nil
	}
}
