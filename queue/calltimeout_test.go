package queue

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/shepherd-go/shepherd/internal/redistest"
)

// A Submit that Redis does not answer fails after the call timeout
// (WithCallTimeout, DefaultCallTimeout) with ErrRedisTimeout, which does
// not claim that the caller's ctx ended: it used to fail with
// context.DeadlineExceeded after a hidden 5s while its ctx had 30s left.
// A Submit whose own ctx ends first still returns ctx.Err(). No task runs
// once Redis thaws: each failed Submit is withdrawn.
func TestSubmitToAFrozenRedisFailsWithErrRedisTimeout(t *testing.T) {
	t.Parallel()
	own := redistest.Start(t)
	rdb := own.NewCtxOnlyClient()
	ctx := testCtx(t, 90*time.Second)
	name := redistest.Name(t)
	// A long TTL: the keep-alives stop during the freeze, and only the
	// Submits are under test.
	q, err := Open(ctx, rdb, name, WithTTL(time.Minute))
	require.NoError(t, err)
	defer func() { _ = closeWithin(q) }()
	quick, err := Open(ctx, rdb, name, WithCallTimeout(time.Second))
	require.NoError(t, err)
	defer func() { _ = closeWithin(quick) }()

	require.NoError(t, own.Freeze())
	thawed := false
	defer func() {
		if !thawed {
			_ = own.Thaw()
		}
	}()
	type outcome struct {
		err  error
		took time.Duration
	}
	var wg sync.WaitGroup
	submit := func(q *Queue, sctx context.Context, id string) *outcome {
		o := &outcome{}
		wg.Add(1)
		go func() {
			defer wg.Done()
			began := time.Now()
			_, o.err = q.Submit(sctx, nil, WithTaskID(id))
			o.took = time.Since(began)
		}()
		return o
	}
	long, cancelLong := context.WithTimeout(ctx, 30*time.Second)
	defer cancelLong()
	short, cancelShort := context.WithTimeout(ctx, 300*time.Millisecond)
	defer cancelShort()
	cancelled, cancel := context.WithCancel(ctx)
	capped := submit(q, long, "capped")
	quicker := submit(quick, long, "quicker")
	ended := submit(q, short, "ended")
	left := submit(q, cancelled, "cancelled")
	time.AfterFunc(300*time.Millisecond, cancel)
	wg.Wait()

	t.Logf("Submit with a 30s ctx: %v after %v", capped.err, capped.took)
	require.ErrorIs(t, capped.err, ErrRedisTimeout)
	assert.NotErrorIs(t, capped.err, context.DeadlineExceeded, "the caller's ctx did not end")
	assert.NoError(t, long.Err())
	assert.GreaterOrEqual(t, capped.took, DefaultCallTimeout-100*time.Millisecond)
	assert.Less(t, capped.took, DefaultCallTimeout+2*time.Second, "not bounded by the call timeout")
	t.Logf("Submit with a 30s ctx, WithCallTimeout(1s): %v after %v", quicker.err, quicker.took)
	require.ErrorIs(t, quicker.err, ErrRedisTimeout)
	assert.NotErrorIs(t, quicker.err, context.DeadlineExceeded)
	assert.GreaterOrEqual(t, quicker.took, time.Second-100*time.Millisecond)
	assert.Less(t, quicker.took, 3*time.Second, "not bounded by WithCallTimeout")

	assert.ErrorIs(t, ended.err, context.DeadlineExceeded)
	assert.NotErrorIs(t, ended.err, ErrRedisTimeout)
	assert.Less(t, ended.took, 2*time.Second, "its own ctx ended first")
	assert.ErrorIs(t, left.err, context.Canceled)
	assert.Less(t, left.took, 2*time.Second, "its own ctx ended first")

	require.NoError(t, own.Thaw())
	thawed = true
	// Close waits for the withdrawals; then nothing of them is left to
	// run.
	require.NoError(t, q.Close(ctx))
	require.NoError(t, quick.Close(ctx))
	c, err := NewClient(rdb, name)
	require.NoError(t, err)
	for _, id := range []string{"capped", "quicker", "ended", "cancelled"} {
		_, err := c.Inspect(ctx, id)
		assert.ErrorIs(t, err, ErrTaskNotFound, "%s: a failed Submit's task is queued", id)
	}
	st, err := c.Stats(ctx)
	require.NoError(t, err)
	assert.Zero(t, st.Available+st.Delayed+st.InFlight, "a failed Submit's task is queued")
	// The timed-out calls reached Redis at the thaw: they were withdrawn,
	// not merely never sent.
	withdrawn, err := rdb.ZCard(ctx, q.lay.withdrawn).Result()
	require.NoError(t, err)
	assert.GreaterOrEqual(t, withdrawn, int64(2))
}

func TestCallTimeoutMustBePositive(t *testing.T) {
	t.Parallel()
	for _, d := range []time.Duration{0, -time.Second} {
		_, err := Open(testCtx(t, 5*time.Second), srv.Client(), redistest.Name(t), WithCallTimeout(d))
		require.ErrorIs(t, err, ErrInvalidOption)
		assert.Contains(t, err.Error(), "call timeout must be positive")
	}
}

// Close against a frozen Redis fails because Redis did not answer, not
// because the caller's ctx ended: its error wraps ErrRedisTimeout and
// not context.DeadlineExceeded while the caller's ctx has time left (it
// claimed DeadlineExceeded after the hidden 5s bound of its give-back).
func TestCloseOnAFrozenRedisFailsWithErrRedisTimeout(t *testing.T) {
	t.Parallel()
	own := redistest.Start(t)
	ctx := testCtx(t, 60*time.Second)
	q, err := Open(ctx, own.NewCtxOnlyClient(), redistest.Name(t), WithTTL(time.Minute), WithCallTimeout(time.Second))
	require.NoError(t, err)
	require.NoError(t, own.Freeze())
	t.Cleanup(func() { _ = own.Thaw() })
	cctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	err = q.Close(cctx)
	require.Error(t, err)
	require.NoError(t, cctx.Err(), "the caller's ctx still has time")
	assert.ErrorIs(t, err, ErrRedisTimeout)
	assert.NotErrorIs(t, err, context.DeadlineExceeded, "the error claims the caller's ctx ended")
}
