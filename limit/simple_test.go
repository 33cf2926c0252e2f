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

func newSimple(t testing.TB, n int, opts ...LimiterOption) *Simple {
	t.Helper()
	f, err := NewFixed(n)
	require.NoError(t, err)
	s, err := NewSimple(f, opts...)
	require.NoError(t, err)
	return s
}

func TestSimpleRejectsAtLimit(t *testing.T) {
	t.Parallel()
	s := newSimple(t, 2)
	ctx := t.Context()
	a, err := s.TryAcquire(ctx)
	require.NoError(t, err)
	b, err := s.Acquire(ctx)
	require.NoError(t, err)
	_, err = s.TryAcquire(ctx)
	require.ErrorIs(t, err, ErrLimitExceeded)
	assert.Equal(t, 2, s.InFlight())

	a.Success()
	a.Success() // a second release is a no-op
	a.Dropped()
	assert.Equal(t, 1, s.InFlight())
	c, err := s.TryAcquire(ctx)
	require.NoError(t, err)
	b.Ignore()
	c.Dropped()
	assert.Equal(t, 0, s.InFlight())

	var zero Token
	zero.Success() // deferred release before the error check is safe

	cctx, cancel := context.WithCancel(ctx)
	cancel()
	_, err = s.TryAcquire(cctx)
	assert.ErrorIs(t, err, context.Canceled)
}

func TestSimpleFeedsAlgorithm(t *testing.T) {
	t.Parallel()
	clock := newFakeClock()
	rec := &recorder{}
	s, err := NewSimple(rec, WithClock(clock.Now))
	require.NoError(t, err)
	tok, err := s.TryAcquire(t.Context())
	require.NoError(t, err)
	clock.Advance(25 * ms)
	tok.Success()
	tok, err = s.TryAcquire(t.Context())
	require.NoError(t, err)
	tok2, err := s.TryAcquire(t.Context())
	require.NoError(t, err)
	clock.Advance(5 * ms)
	tok.Dropped()
	tok2.Ignore() // not fed
	assert.Equal(t, []Sample{
		{RTT: 25 * ms, InFlight: 1},
		{RTT: 5 * ms, InFlight: 1, Dropped: true},
	}, rec.samples)
	assert.Equal(t, 102, s.Limit(), "the limit follows what the algorithm returns")
}

func TestReportFeedsTheCallersRTT(t *testing.T) {
	t.Parallel()
	clock := newFakeClock()
	rec := &recorder{}
	s, err := NewSimple(rec, WithClock(clock.Now))
	require.NoError(t, err)
	b, err := NewBlocking(s)
	require.NoError(t, err)
	tok, err := s.TryAcquire(t.Context())
	require.NoError(t, err)
	clock.Advance(25 * ms)
	tok.Report(3*ms, false)
	tok.Success()                     // a second release is a no-op
	tok, err = b.Acquire(t.Context()) // through a wrapper too
	require.NoError(t, err)
	clock.Advance(25 * ms)
	tok.Report(7*ms, true)
	assert.Equal(t, []Sample{
		{RTT: 3 * ms, InFlight: 1},
		{RTT: 7 * ms, InFlight: 1, Dropped: true},
	}, rec.samples)
	assert.Equal(t, 0, s.InFlight())
}

func TestSimpleOptions(t *testing.T) {
	t.Parallel()
	_, err := NewSimple(nil)
	assert.ErrorIs(t, err, ErrInvalidOption)
	f, _ := NewFixed(1)
	_, err = NewSimple(f, WithClock(nil))
	assert.ErrorIs(t, err, ErrInvalidOption)
	_, err = NewSimple(f, WithPartition("live", 1))
	assert.ErrorIs(t, err, ErrInvalidOption)
}

// TestSimpleConcurrentNeverExceedsLimit hammers one limiter whose limit
// moves (AIMD with drops) and checks at every admission that the number of
// holders is within the limit in force, and that no token leaks.
func TestSimpleConcurrentNeverExceedsLimit(t *testing.T) {
	t.Parallel()
	a, err := NewAIMD(WithAIMDInitial(8), WithAIMDMin(4), WithAIMDMax(16))
	require.NoError(t, err)
	s, err := NewSimple(a)
	require.NoError(t, err)

	var holders, maxSeen, over atomic.Int64
	var wg sync.WaitGroup
	for g := range 32 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range 2000 {
				tok, err := s.TryAcquire(t.Context())
				if err != nil {
					continue
				}
				h := holders.Add(1)
				if h > 16 {
					over.Add(1)
				}
				for {
					m := maxSeen.Load()
					if h <= m || maxSeen.CompareAndSwap(m, h) {
						break
					}
				}
				runtime.Gosched() // hold the slot while others try
				holders.Add(-1)
				if (g+i)%7 == 0 {
					tok.Dropped()
				} else {
					tok.Success()
				}
			}
		}()
	}
	wg.Wait()
	assert.Zero(t, over.Load())
	assert.LessOrEqual(t, maxSeen.Load(), int64(16))
	assert.Zero(t, s.InFlight(), "a token leaked")
}

// TestSimpleConcurrentFixedLimitIsExact checks, with a fixed limit, that
// the count of holders never exceeds it under contention and that every
// slot is usable (the limit is reached).
func TestSimpleConcurrentFixedLimitIsExact(t *testing.T) {
	t.Parallel()
	const limit = 5
	s := newSimple(t, limit)
	var holders, peak, over atomic.Int64
	var wg sync.WaitGroup
	stop := make(chan struct{})
	for range 16 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				select {
				case <-stop:
					return
				default:
				}
				tok, err := s.TryAcquire(t.Context())
				if err != nil {
					continue
				}
				h := holders.Add(1)
				for m := peak.Load(); h > m && !peak.CompareAndSwap(m, h); m = peak.Load() {
				}
				if h > limit {
					over.Add(1)
				}
				runtime.Gosched() // hold the slot while others try
				holders.Add(-1)
				tok.Success()
			}
		}()
	}
	require.Eventually(t, func() bool { return peak.Load() == limit }, 5*time.Second, time.Millisecond)
	close(stop)
	wg.Wait()
	assert.Zero(t, over.Load())
	assert.Zero(t, s.InFlight())
}

// TestStaleTokenCopyCannotReleaseAnother checks the generation guard: a
// copy of a released Token must not release the request that reuses its
// pooled state.
func TestStaleTokenCopyCannotReleaseAnother(t *testing.T) {
	t.Parallel()
	s := newSimple(t, 10)
	a, err := s.TryAcquire(t.Context())
	require.NoError(t, err)
	stale := a
	a.Success()
	for range 100 { // whichever of these reuses a's state, it stays held
		_, err := s.TryAcquire(t.Context())
		if err != nil {
			break
		}
	}
	held := s.InFlight()
	stale.Success()
	stale.Dropped()
	assert.Equal(t, held, s.InFlight())
}
