package limit

import (
	"context"
	"runtime"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func newBlocking(t testing.TB, n int, opts ...BlockingOption) *Blocking {
	t.Helper()
	b, err := NewBlocking(newSimple(t, n), opts...)
	require.NoError(t, err)
	return b
}

// waitWaiting waits until n callers are in b's line.
func waitWaiting(t *testing.T, b *Blocking, n int) {
	t.Helper()
	require.Eventually(t, func() bool { return b.Waiting() == n }, 5*time.Second, time.Millisecond)
}

func TestBlockingWaitsInOrder(t *testing.T) {
	t.Parallel()
	b := newBlocking(t, 1, WithBlockingTimeout(0))
	first, err := b.Acquire(t.Context())
	require.NoError(t, err)

	// Three waiters queue up in a known order.
	order := make(chan int, 3)
	toks := make(chan Token, 3)
	var wg sync.WaitGroup
	for i := range 3 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			tok, err := b.Acquire(t.Context())
			if err != nil {
				t.Errorf("waiter %d: %v", i, err)
				return
			}
			order <- i
			toks <- tok
		}()
		waitWaiting(t, b, i+1)
	}
	_, err = b.TryAcquire(t.Context())
	require.ErrorIs(t, err, ErrLimitExceeded, "TryAcquire must not jump the line")

	first.Success()
	for want := range 3 {
		select {
		case got := <-order:
			require.Equal(t, want, got)
		case <-time.After(5 * time.Second):
			t.Fatalf("waiter %d never admitted", want)
		}
		assert.Equal(t, 1, b.InFlight())
		(<-toks).Success()
	}
	wg.Wait()
	assert.Zero(t, b.InFlight())
	assert.Zero(t, b.Waiting())
}

func TestBlockingTimeout(t *testing.T) {
	t.Parallel()
	b := newBlocking(t, 1, WithBlockingTimeout(20*time.Millisecond))
	tok, err := b.Acquire(t.Context())
	require.NoError(t, err)
	start := time.Now()
	_, err = b.Acquire(t.Context())
	require.ErrorIs(t, err, ErrLimitExceeded)
	assert.GreaterOrEqual(t, time.Since(start), 20*time.Millisecond)
	assert.Zero(t, b.Waiting())
	tok.Success()
	tok, err = b.Acquire(t.Context())
	require.NoError(t, err)
	tok.Success()
}

func TestBlockingContextCancel(t *testing.T) {
	t.Parallel()
	b := newBlocking(t, 1, WithBlockingTimeout(0))
	tok, err := b.Acquire(t.Context())
	require.NoError(t, err)

	ctx, cancel := context.WithCancel(t.Context())
	errc := make(chan error, 1)
	go func() {
		_, err := b.Acquire(ctx)
		errc <- err
	}()
	waitWaiting(t, b, 1)
	cancel()
	select {
	case err := <-errc:
		require.ErrorIs(t, err, context.Canceled)
	case <-time.After(5 * time.Second):
		t.Fatal("cancelled waiter still waiting")
	}
	assert.Zero(t, b.Waiting())

	// A cancelled ctx fails at once, also when others are waiting.
	_, err = b.Acquire(ctx)
	require.ErrorIs(t, err, context.Canceled)
	tok.Success()
	assert.Zero(t, b.InFlight())
}

// TestBlockingConcurrent churns waiters with short timeouts and
// cancellations under -race: the in-flight count never exceeds the limit,
// and every slot comes back (a slot handed to a waiter that just gave up
// must not leak).
func TestBlockingConcurrent(t *testing.T) {
	t.Parallel()
	const limit = 3
	b := newBlocking(t, limit, WithBlockingTimeout(2*time.Millisecond))
	var holders, over, admitted atomic.Int64
	var wg sync.WaitGroup
	for g := range 24 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range 200 {
				ctx, cancel := context.WithCancel(t.Context())
				if (g+i)%5 == 0 {
					cancel() // some give up at once, some while waiting
				}
				tok, err := b.Acquire(ctx)
				cancel()
				if err != nil {
					continue
				}
				admitted.Add(1)
				if holders.Add(1) > limit {
					over.Add(1)
				}
				for range 5 {
					runtime.Gosched() // hold the slot so that others must wait
				}
				holders.Add(-1)
				tok.Success()
			}
		}()
	}
	wg.Wait()
	assert.Zero(t, over.Load())
	assert.Positive(t, admitted.Load())
	t.Logf("admitted %d of %d", admitted.Load(), 24*200)
	assert.Zero(t, b.InFlight(), "a slot leaked")
	assert.Zero(t, b.Waiting())
	// All slots are still usable.
	for range limit {
		_, err := b.TryAcquire(t.Context())
		require.NoError(t, err)
	}
}

func TestBlockingOptions(t *testing.T) {
	t.Parallel()
	_, err := NewBlocking(nil)
	assert.ErrorIs(t, err, ErrInvalidOption)
	_, err = NewBlocking(newSimple(t, 1), WithBlockingTimeout(-1))
	assert.ErrorIs(t, err, ErrInvalidOption)
	b := newBlocking(t, 7)
	assert.Equal(t, 7, b.Limit())
}
