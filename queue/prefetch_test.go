package queue

import (
	"context"
	"errors"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/shepherd-go/shepherd/internal/redistest"
)

// blocker is a handler that holds the task with payload "block" until
// released, and records every task it sees.
type blocker struct {
	started chan struct{}
	release chan struct{}
	mu      sync.Mutex
	seen    []string
}

func newBlocker() *blocker {
	return &blocker{started: make(chan struct{}, 1), release: make(chan struct{})}
}

func (b *blocker) handle(ctx context.Context, t *Task) ([]byte, error) {
	b.mu.Lock()
	b.seen = append(b.seen, string(t.Payload))
	b.mu.Unlock()
	if string(t.Payload) == "block" {
		b.started <- struct{}{}
		select {
		case <-b.release:
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
	return echo(ctx, t)
}

func (b *blocker) saw() []string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return append([]string(nil), b.seen...)
}

// inFlight waits until Redis counts n tasks in flight.
func inFlight(t *testing.T, q *Queue, n int64) {
	t.Helper()
	require.Eventually(t, func() bool {
		st, err := q.Stats(context.Background())
		return err == nil && st.InFlight == n
	}, 5*time.Second, 5*time.Millisecond, "tasks in flight never reached %d", n)
}

func TestPrefetchedTasksGoBackUnstartedAtStop(t *testing.T) {
	t.Parallel()
	name := redistest.Name(t)
	q := open(t, name)
	ctx := testCtx(t, 20*time.Second)
	b := newBlocker()
	s := serve(t, q, b.handle, WithWorkers(1), WithPrefetch(3))
	first, err := q.Submit(ctx, []byte("block"))
	require.NoError(t, err)
	<-b.started
	var held []*Future
	for _, p := range []string{"a", "b", "c"} {
		f, err := q.Submit(ctx, []byte(p))
		require.NoError(t, err)
		held = append(held, f)
	}
	inFlight(t, q, 4) // the running one and three taken ahead

	stopped := make(chan error, 1)
	go func() { stopped <- s.Stop(ctx) }()
	require.Eventually(t, s.isStopping, 5*time.Second, time.Millisecond)
	close(b.release)
	require.NoError(t, <-stopped)
	res, err := wait(t, first, 5*time.Second)
	require.NoError(t, err)
	assert.Equal(t, "block#1", string(res))
	assert.Equal(t, []string{"block"}, b.saw(), "a task taken ahead ran after Stop began")
	for _, f := range held {
		info, err := q.Inspect(ctx, f.ID())
		require.NoError(t, err)
		assert.Equal(t, StateWaiting, info.State, "a task taken ahead goes back at Stop")
		assert.Equal(t, 0, info.Attempt, "a task taken ahead and never started uses no attempt at Stop")
	}

	serve(t, q, echo, WithWorkers(1))
	for i, f := range held {
		res, err := wait(t, f, 5*time.Second)
		require.NoError(t, err)
		assert.Equal(t, []string{"a#1", "b#1", "c#1"}[i], string(res))
	}
}

func TestTaskCancelledWhileTakenAheadDoesNotRun(t *testing.T) {
	t.Parallel()
	q := open(t, redistest.Name(t))
	ctx := testCtx(t, 20*time.Second)
	b := newBlocker()
	serve(t, q, b.handle, WithWorkers(1), WithPrefetch(1))
	first, err := q.Submit(ctx, []byte("block"))
	require.NoError(t, err)
	<-b.started
	f, err := q.Submit(ctx, []byte("x"))
	require.NoError(t, err)
	inFlight(t, q, 2)
	require.NoError(t, q.Cancel(ctx, f.ID()))
	// The cancel message reaches the process before the worker frees up:
	// the Redis side marked it at once, the process is told on pub/sub.
	require.Eventually(t, func() bool {
		q.mu.Lock()
		s := q.server
		q.mu.Unlock()
		s.mu.Lock()
		defer s.mu.Unlock()
		r := s.running[f.ID()]
		return r != nil && r.cancelled.Load()
	}, 5*time.Second, time.Millisecond)
	close(b.release)
	_, err = wait(t, first, 5*time.Second)
	require.NoError(t, err)
	_, err = wait(t, f, 5*time.Second)
	var te *TaskError
	require.True(t, errors.As(err, &te), "want a *TaskError, got %v", err)
	assert.True(t, te.Cancelled)
	assert.Equal(t, []string{"block"}, b.saw(), "a task cancelled while taken ahead ran")
}

func TestPrefetchKeepsEveryTaskToOneOutcome(t *testing.T) {
	t.Parallel()
	name := redistest.Name(t)
	ctx := testCtx(t, 30*time.Second)
	h := func(ctx context.Context, t *Task) ([]byte, error) {
		if t.Attempt == 1 && len(t.Payload)%3 == 0 {
			return nil, errors.New("first attempts of some fail")
		}
		return echo(ctx, t)
	}
	for range 2 {
		serve(t, open(t, name), h, WithWorkers(2), WithPrefetch(5), fastRetries)
	}
	q := open(t, name)
	var fs []*Future
	for i := range 300 {
		f, err := q.Submit(ctx, make([]byte, i%7))
		require.NoError(t, err)
		fs = append(fs, f)
	}
	for i, f := range fs {
		res, err := wait(t, f, 20*time.Second)
		require.NoError(t, err)
		want := "#1"
		if i%7%3 == 0 {
			want = "#2"
		}
		assert.Equal(t, string(make([]byte, i%7))+want, string(res))
	}
	st, err := q.Stats(ctx)
	require.NoError(t, err)
	assert.Zero(t, st.InFlight+st.Available+st.Retrying, "work left: %+v", st)
}

func TestOutcomeMessageCarriesManyOutcomesWithAnyBytes(t *testing.T) {
	t.Parallel()
	q := open(t, redistest.Name(t))
	ids := []string{"plain", "with\nnewlines\n", "7\nfake\n1\n0\n0\n"}
	fs := make([]*Future, len(ids))
	q.mu.Lock()
	for i, id := range ids {
		fs[i] = newFuture(q, id)
		q.futures[id] = fs[i]
	}
	q.mu.Unlock()
	rec := func(id, st, errs, res string) string {
		return strconv.Itoa(len(id)) + "\n" + st + "\n1\n" + strconv.Itoa(len(errs)) + "\n" + strconv.Itoa(len(res)) + "\n" + id + errs + res
	}
	q.outcomeMessage(rec(ids[0], "done", "", "r\n1") +
		rec(ids[1], "dead", `[{"a":1,"e":"boom\nline","t":5}]`, "") +
		rec(ids[2], "done", "", ""))
	for _, f := range fs {
		select {
		case <-f.Done():
		default:
			t.Fatalf("future %q not completed by the message", f.ID())
		}
	}
	res, err := fs[0].Wait(context.Background())
	require.NoError(t, err)
	assert.Equal(t, "r\n1", string(res))
	_, err = fs[1].Wait(context.Background())
	var te *TaskError
	require.True(t, errors.As(err, &te))
	require.Len(t, te.Attempts, 1)
	assert.Equal(t, "boom\nline", te.Attempts[0].Err)
	res, err = fs[2].Wait(context.Background())
	require.NoError(t, err)
	assert.Empty(t, res)
}
