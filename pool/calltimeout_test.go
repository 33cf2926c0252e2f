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

// A DispatchJob whose admission Redis does not answer fails after the
// call timeout (WithCallTimeout, DefaultCallTimeout) with
// ErrRedisTimeout, which does not claim that the caller's ctx ended,
// whether its admission went out alone or in an admitters' batch. A
// batched one used to fail with context.DeadlineExceeded after a hidden
// 10s while its ctx had 30s left (and a lone one waited for its ctx). One
// whose own ctx ends first returns ctx.Err(). No job runs once Redis
// thaws: each failed dispatch is withdrawn.
func TestDispatchToAFrozenRedisFailsWithErrRedisTimeout(t *testing.T) {
	t.Parallel()
	s := redistest.Start(t)
	name := redistest.Name(t)
	// A long TTL: the keep-alives stop during the freeze, and only the
	// dispatches are under test. No worker: a job waits in the pool.
	lone := addNode(t, s.NewCtxOnlyClient(), name, WithWorkerTTL(time.Minute))
	batched := addNode(t, s.NewCtxOnlyClient(), name, WithWorkerTTL(time.Minute))
	quick := addNode(t, s.NewCtxOnlyClient(), name, WithWorkerTTL(time.Minute), WithCallTimeout(time.Second))
	// Another admission "under way" sends every one of this node to the
	// admitters.
	batched.admitting.Add(1)
	defer batched.admitting.Add(-1)

	require.NoError(t, s.Freeze())
	thawed := false
	defer func() {
		if !thawed {
			_ = s.Thaw()
		}
	}()
	type outcome struct {
		err  error
		took time.Duration
	}
	var wg sync.WaitGroup
	dispatch := func(n *Node, ctx context.Context, key string) *outcome {
		o := &outcome{}
		wg.Add(1)
		go func() {
			defer wg.Done()
			began := time.Now()
			o.err = n.DispatchJob(ctx, key, nil)
			o.took = time.Since(began)
		}()
		return o
	}
	long, cancelLong := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancelLong()
	short, cancelShort := context.WithTimeout(context.Background(), 300*time.Millisecond)
	defer cancelShort()
	// "ended" goes first, in a batch that hangs; "batched" waits behind
	// it, and still gets its answer within the call timeout (counted from
	// its own call).
	inFlight := make(chan struct{}, 1)
	batched.test.admitHook = func(after bool) {
		if !after {
			select {
			case inFlight <- struct{}{}:
			default:
			}
		}
	}
	alone := dispatch(lone, long, "alone")
	quicker := dispatch(quick, long, "quicker")
	ended := dispatch(batched, short, "ended")
	awaitSignal(t, inFlight, "inFlight")
	inBatch := dispatch(batched, long, "batched")
	wg.Wait()

	for what, o := range map[string]*outcome{"alone": alone, "in a batch": inBatch} {
		t.Logf("DispatchJob %s with a 30s ctx: %v after %v", what, o.err, o.took)
		assert.ErrorIs(t, o.err, ErrRedisTimeout, what)
		assert.NotErrorIs(t, o.err, context.DeadlineExceeded, "%s: the caller's ctx did not end", what)
		assert.GreaterOrEqual(t, o.took, DefaultCallTimeout-100*time.Millisecond, what)
		assert.Less(t, o.took, DefaultCallTimeout+2*time.Second, "%s: not bounded by the call timeout", what)
	}
	t.Logf("DispatchJob with a 30s ctx, WithCallTimeout(1s): %v after %v", quicker.err, quicker.took)
	assert.ErrorIs(t, quicker.err, ErrRedisTimeout)
	assert.NotErrorIs(t, quicker.err, context.DeadlineExceeded)
	assert.GreaterOrEqual(t, quicker.took, time.Second-100*time.Millisecond)
	assert.Less(t, quicker.took, 3*time.Second, "not bounded by WithCallTimeout")
	assert.NoError(t, long.Err())
	assert.ErrorIs(t, ended.err, context.DeadlineExceeded)
	assert.NotErrorIs(t, ended.err, ErrRedisTimeout)
	assert.Less(t, ended.took, 2*time.Second, "its own ctx ended first")

	require.NoError(t, s.Thaw())
	thawed = true
	// Every admission ran at the thaw, and was withdrawn: nothing runs on
	// a worker that arrives.
	require.NoError(t, batched.Close(testCtx(t, 20*time.Second)))
	require.NoError(t, quick.Close(testCtx(t, 20*time.Second)))
	requireWithdrawn(t, lone)
}

func TestCallTimeoutMustBePositive(t *testing.T) {
	t.Parallel()
	for _, d := range []time.Duration{0, -time.Second} {
		_, err := AddNode(testCtx(t, 5*time.Second), srv.Client(), redistest.Name(t), WithCallTimeout(d))
		require.ErrorIs(t, err, ErrInvalidOption)
		assert.Contains(t, err.Error(), "call timeout must be positive")
	}
}
