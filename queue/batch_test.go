package queue

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/shepherd-go/shepherd/internal/redistest"
)

// recorder is a handler: "bad" fails permanently, "hold" runs until its
// ctx ends, anything else succeeds; it records what it started.
type recorder struct {
	mu      sync.Mutex
	started []string
	holding chan struct{}
}

func (r *recorder) handle(ctx context.Context, t *Task) ([]byte, error) {
	r.mu.Lock()
	r.started = append(r.started, string(t.Payload))
	r.mu.Unlock()
	switch string(t.Payload) {
	case "bad":
		return nil, Permanent(errors.New("bad input"))
	case "hold":
		r.holding <- struct{}{}
		<-ctx.Done()
		return nil, ctx.Err()
	}
	return t.Payload, nil
}

func (r *recorder) saw(p string) int {
	r.mu.Lock()
	defer r.mu.Unlock()
	n := 0
	for _, s := range r.started {
		if s == p {
			n++
		}
	}
	return n
}

func TestFailFastBatchCancelsTheRest(t *testing.T) {
	t.Parallel()
	q := open(t, redistest.Name(t))
	ctx := testCtx(t, 30*time.Second)
	rec := &recorder{holding: make(chan struct{}, 2)}
	b := q.NewBatch(FailFast)
	var holds, waits []*Future
	for range 2 {
		f, err := b.Submit(ctx, []byte("hold"))
		require.NoError(t, err)
		holds = append(holds, f)
	}
	serve(t, q, rec.handle, WithWorkers(3))
	<-rec.holding
	<-rec.holding
	for range 10 {
		f, err := b.Submit(ctx, []byte("later"), WithDelay(time.Hour))
		require.NoError(t, err)
		waits = append(waits, f)
	}
	bad, err := b.Submit(ctx, []byte("bad"))
	require.NoError(t, err)

	err = b.Wait(ctx)
	var te *TaskError
	require.True(t, errors.As(err, &te), "want the failed task's error, got %v", err)
	assert.Equal(t, bad.ID(), te.ID)
	assert.ErrorIs(t, err, ErrFailed)
	// The waiting ones ended without running, the running ones were
	// cancelled.
	for _, f := range append(waits, holds...) {
		_, err := wait(t, f, 5*time.Second)
		assert.ErrorIs(t, err, ErrCancelled, "task %s", f.ID())
	}
	assert.Zero(t, rec.saw("later"), "a task of a failed batch ran")
	st, err := q.Stats(ctx)
	require.NoError(t, err)
	assert.Zero(t, st.Delayed+st.Available+st.InFlight, "%+v", st)
	_, err = b.Submit(ctx, []byte("x"))
	assert.ErrorIs(t, err, ErrBatchFailed)
	require.ErrorIs(t, b.Wait(ctx), ErrFailed, "Wait again")
}

func TestCollectAllBatchJoinsEveryFailure(t *testing.T) {
	t.Parallel()
	q := open(t, redistest.Name(t))
	ctx := testCtx(t, 30*time.Second)
	rec := &recorder{}
	serve(t, q, rec.handle, WithWorkers(2))
	b := q.NewBatch(CollectAll)
	var bad []string
	for _, p := range []string{"ok", "bad", "ok", "ok", "bad", "ok"} {
		f, err := b.Submit(ctx, []byte(p))
		require.NoError(t, err)
		if p == "bad" {
			bad = append(bad, f.ID())
		}
	}
	err := b.Wait(ctx)
	require.Error(t, err)
	joined, ok := err.(interface{ Unwrap() []error })
	require.True(t, ok, "want errors.Join, got %T", err)
	var ids []string
	for _, e := range joined.Unwrap() {
		var te *TaskError
		require.True(t, errors.As(e, &te), "%v", e)
		ids = append(ids, te.ID)
	}
	assert.ElementsMatch(t, bad, ids)
	assert.Equal(t, 4, rec.saw("ok"), "every task runs under collect-all")

	ok2 := q.NewBatch(CollectAll)
	for range 3 {
		_, err := ok2.Submit(ctx, []byte("ok"))
		require.NoError(t, err)
	}
	require.NoError(t, ok2.Wait(ctx))
	require.NoError(t, q.NewBatch(FailFast).Wait(ctx), "an empty batch")
	assert.ErrorIs(t, q.WaitBatch(ctx, "no-such-batch"), ErrBatchNotFound)
	assert.ErrorIs(t, q.WaitBatch(ctx, ""), ErrInvalidOption)
}

// A batch outlives the process that made it: another waits for it by id.
func TestBatchWaitedFromAnotherProcess(t *testing.T) {
	t.Parallel()
	name := redistest.Name(t)
	ctx := testCtx(t, 30*time.Second)
	maker, err := Open(ctx, srv.Client(), name)
	require.NoError(t, err)
	b := maker.NewBatch(CollectAll)
	for _, p := range []string{"ok", "bad", "ok"} {
		_, err := b.Submit(ctx, []byte(p))
		require.NoError(t, err)
	}
	require.NoError(t, maker.Close(ctx)) // the maker is gone

	other := open(t, name)
	serve(t, other, (&recorder{}).handle, WithWorkers(2))
	client, err := NewClient(srv.Client(), name)
	require.NoError(t, err)
	err = client.WaitBatch(ctx, b.ID())
	var te *TaskError
	require.True(t, errors.As(err, &te), "got %v", err)
	assert.Equal(t, "bad input", te.Attempts[len(te.Attempts)-1].Err)
	cctx, cancel := context.WithTimeout(ctx, time.Millisecond)
	defer cancel()
	slow := other.NewBatch(FailFast)
	_, err = slow.Submit(ctx, []byte("later"), WithDelay(time.Hour))
	require.NoError(t, err)
	assert.ErrorIs(t, slow.Wait(cctx), context.DeadlineExceeded)
}

// A withdrawn task (its Submit failed) was never part of its batch: the
// batch does not wait for it.
func TestWithdrawnTaskLeavesItsBatch(t *testing.T) {
	t.Parallel()
	q := open(t, redistest.Name(t))
	ctx := testCtx(t, 20*time.Second)
	b := q.NewBatch(CollectAll)
	gone, err := b.Submit(ctx, []byte("ok"), WithDelay(time.Hour))
	require.NoError(t, err)
	_, err = b.Submit(ctx, []byte("ok"))
	require.NoError(t, err)
	// A random id is its Submit's nonce; the task stores none (wire.go).
	require.NotContains(t, storedTask(t, ctx, q.rdb, q.lay, gone.ID()), fieldNonce)
	nonce := gone.ID()
	res, err := withdrawScript.Run(ctx, q.rdb, q.lay.common(), q.lay.commonArgs(gone.ID(), nonce, withdrawnTTL.Milliseconds())...).Result()
	require.NoError(t, err)
	require.Equal(t, "WITHDRAWN", res)
	serve(t, q, (&recorder{}).handle, WithWorkers(1))
	require.NoError(t, b.Wait(ctx))
}
