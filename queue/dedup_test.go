package queue

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/shepherd-go/shepherd/internal/redistest"
)

// A duplicate within the window queues nothing and gets the first task's
// future, in the submitting process and in another one; the task runs
// once. After the window the key queues a new task.
func TestDedupHandsTheFirstTasksFuture(t *testing.T) {
	t.Parallel()
	name := redistest.Name(t)
	q1, q2 := open(t, name), open(t, name)
	ctx := testCtx(t, 30*time.Second)
	var runs atomic.Int32
	release, free := gate(t)
	serve(t, q1, func(ctx context.Context, t *Task) ([]byte, error) {
		runs.Add(1)
		<-release
		return append([]byte("ran "), t.Payload...), nil
	}, WithWorkers(2))
	first, err := q1.Submit(ctx, []byte("first"), WithDedup("invoice-42", time.Hour))
	require.NoError(t, err)
	assert.False(t, first.Duplicate())
	info, err := q1.Inspect(ctx, first.ID())
	require.NoError(t, err)
	assert.Equal(t, "invoice-42", info.DedupKey)
	same, err := q1.Submit(ctx, []byte("second"), WithDedup("invoice-42", time.Hour))
	require.NoError(t, err)
	other, err := q2.Submit(ctx, []byte("third"), WithDedup("invoice-42", time.Minute))
	require.NoError(t, err)
	for _, f := range []*Future{same, other} {
		assert.True(t, f.Duplicate())
		assert.Equal(t, first.ID(), f.ID())
	}
	st, err := q1.Stats(ctx)
	require.NoError(t, err)
	assert.EqualValues(t, 1, st.Available+st.InFlight, "one task queued")
	free()
	for _, f := range []*Future{first, same, other} {
		res, err := wait(t, f, 10*time.Second)
		require.NoError(t, err)
		assert.Equal(t, "ran first", string(res))
	}
	assert.EqualValues(t, 1, runs.Load())

	short, err := q1.Submit(ctx, []byte("x"), WithDedup("brief", 50*time.Millisecond))
	require.NoError(t, err)
	require.Eventually(t, func() bool {
		n, err := q1.rdb.Exists(ctx, q1.lay.dedupPrefix+"brief").Result()
		return err == nil && n == 0
	}, 5*time.Second, 5*time.Millisecond, "the window ends")
	again, err := q1.Submit(ctx, []byte("y"), WithDedup("brief", time.Minute))
	require.NoError(t, err)
	assert.False(t, again.Duplicate())
	assert.NotEqual(t, short.ID(), again.ID())
}

// The window is independent of the outcome's retention: a duplicate of a
// task whose outcome is no longer kept is still refused, and its future
// says the first task is gone.
func TestDedupOutlivesTheRetention(t *testing.T) {
	t.Parallel()
	name := redistest.Name(t)
	q1, q2 := open(t, name), open(t, name)
	serve(t, q1, echo, WithWorkers(1))
	ctx := testCtx(t, 30*time.Second)
	f, err := q1.Submit(ctx, []byte("a"), WithDedup("k", time.Hour), WithRetention(time.Millisecond))
	require.NoError(t, err)
	_, err = wait(t, f, 5*time.Second)
	require.NoError(t, err)
	require.Eventually(t, func() bool {
		n, err := q1.rdb.Exists(ctx, q1.lay.task(f.ID())).Result()
		return err == nil && n == 0
	}, 5*time.Second, time.Millisecond)
	dup, err := q2.Submit(ctx, []byte("b"), WithDedup("k", time.Hour))
	require.NoError(t, err)
	assert.True(t, dup.Duplicate())
	_, err = wait(t, dup, 5*time.Second)
	assert.ErrorIs(t, err, ErrTaskNotFound)
}

// A withdrawn Submit frees its key; bad keys and windows are refused with
// nothing written.
func TestDedupWithdrawalAndBadInput(t *testing.T) {
	t.Parallel()
	name := redistest.Name(t)
	q := open(t, name)
	ctx := testCtx(t, 20*time.Second)
	before := redistest.Keys(t, q.rdb, "shepherd:{"+name+"}:*")
	for _, o := range []SubmitOption{WithDedup("", time.Second), WithDedup(string(make([]byte, MaxDedupKeySize+1)), time.Second),
		WithDedup("k", 0), WithDedup("k", -time.Second), WithDedup("k", time.Microsecond)} {
		_, err := q.Submit(ctx, nil, o)
		assert.ErrorIs(t, err, ErrInvalidOption)
	}
	assert.Equal(t, before, redistest.Keys(t, q.rdb, "shepherd:{"+name+"}:*"))

	// A Submit as its failed call delivered it, then its withdrawal.
	res, err := submitScript.Run(ctx, q.rdb, q.lay.common(), q.lay.commonArgs(q.proc, 100, "t1", "p", "1", 1, 1000, 0, 1000, "nonce-1", "", "", "ff", 2, "w", 60_000, "")...).Result()
	require.NoError(t, err)
	require.Equal(t, int64(1), res, "queued: the count of tasks")
	res, err = withdrawScript.Run(ctx, q.rdb, q.lay.common(), q.lay.commonArgs("t1", "nonce-1", withdrawnTTL.Milliseconds())...).Result()
	require.NoError(t, err)
	require.Equal(t, "WITHDRAWN", res)
	n, err := q.rdb.Exists(ctx, q.lay.dedupPrefix+"w", q.lay.tenants, q.lay.tenantReady("", 2)).Result()
	require.NoError(t, err)
	assert.Zero(t, n, "the withdrawn task's key, list or count is left")
	f, err := q.Submit(ctx, nil, WithDedup("w", time.Minute))
	require.NoError(t, err)
	assert.False(t, f.Duplicate())
}
