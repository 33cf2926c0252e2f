package limit

import (
	"context"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func newPartitioned(t testing.TB, n int, opts ...LimiterOption) *Partitioned {
	t.Helper()
	f, err := NewFixed(n)
	require.NoError(t, err)
	opts = append([]LimiterOption{WithPartition("live", 0.9), WithPartition("batch", 0.1)}, opts...)
	p, err := NewPartitioned(f, opts...)
	require.NoError(t, err)
	return p
}

func acquireN(t *testing.T, p *Partitioned, name string, n int) []Token {
	t.Helper()
	var toks []Token
	for range n {
		tok, err := p.AcquirePartition(t.Context(), name)
		require.NoError(t, err, "partition %s after %d", name, len(toks))
		toks = append(toks, tok)
	}
	return toks
}

func TestPartitionedBorrowAndReserve(t *testing.T) {
	t.Parallel()
	clock := newFakeClock()
	p := newPartitioned(t, 10, WithClock(clock.Now), WithIdleWindow(time.Second))
	ctx := t.Context()

	// Batch may borrow the whole limit while live is idle.
	batch := acquireN(t, p, "batch", 10)
	_, err := p.AcquirePartition(ctx, "batch")
	require.ErrorIs(t, err, ErrLimitExceeded)

	// Live is refused (the slots are taken) and now reserves its share:
	// as batch requests finish, their slots go to live, not back to batch.
	_, err = p.AcquirePartition(ctx, "live")
	require.ErrorIs(t, err, ErrLimitExceeded)
	for i := range 8 {
		batch[i].Success()
		_, err = p.AcquirePartition(ctx, "batch")
		require.ErrorIs(t, err, ErrLimitExceeded, "batch took a slot owed to live")
	}
	live := acquireN(t, p, "live", 8)
	assert.Equal(t, 8, p.PartitionInFlight("live"))
	assert.Equal(t, 2, p.PartitionInFlight("batch"))

	// Unknown partitions get only capacity nobody reserves.
	ctxUnknown := ContextWithPartition(ctx, "nightly")
	_, err = p.TryAcquire(ctxUnknown)
	require.ErrorIs(t, err, ErrLimitExceeded)
	batch[8].Success()
	batch[9].Success()
	// Batch (refused within the window) reserves its 1 slot; live's
	// reservation is 9 − 8 = 1: one slot is free for nobody in particular.
	_, err = p.TryAcquire(ctxUnknown)
	require.ErrorIs(t, err, ErrLimitExceeded)
	live = append(live, acquireN(t, p, "live", 1)...)
	b := acquireN(t, p, "batch", 1)
	_, err = p.TryAcquire(ctxUnknown)
	require.ErrorIs(t, err, ErrLimitExceeded)

	// Once the refusals are older than the idle window, nothing is
	// reserved and an unknown partition may use excess capacity.
	for _, tok := range live[:5] {
		tok.Success()
	}
	clock.Advance(time.Second)
	u := acquireN(t, p, "", 5)
	assert.Equal(t, 5, p.PartitionInFlight("nightly"))
	assert.Equal(t, 10, p.InFlight())
	for _, tok := range append(append(live[5:], b...), u...) {
		tok.Success()
	}
	assert.Zero(t, p.InFlight())
}

func TestPartitionedResolver(t *testing.T) {
	t.Parallel()
	type tenantKey struct{}
	f, _ := NewFixed(4)
	p, err := NewPartitioned(f, WithPartition("gold", 0.5), WithPartition("free", 0.5),
		WithResolver(func(ctx context.Context) string {
			s, _ := ctx.Value(tenantKey{}).(string)
			return s
		}))
	require.NoError(t, err)
	tok, err := p.Acquire(context.WithValue(t.Context(), tenantKey{}, "gold"))
	require.NoError(t, err)
	assert.Equal(t, 1, p.PartitionInFlight("gold"))
	tok.Success()
}

func TestPartitionedOptions(t *testing.T) {
	t.Parallel()
	f, _ := NewFixed(4)
	for name, opts := range map[string][]LimiterOption{
		"none":      nil,
		"empty":     {WithPartition("", 0.5)},
		"repeated":  {WithPartition("a", 0.5), WithPartition("a", 0.1)},
		"share":     {WithPartition("a", 0)},
		"sum":       {WithPartition("a", 0.6), WithPartition("b", 0.5)},
		"idle":      {WithPartition("a", 1), WithIdleWindow(0)},
		"resolver":  {WithPartition("a", 1), WithResolver(nil)},
		"clock nil": {WithPartition("a", 1), WithClock(nil)},
	} {
		_, err := NewPartitioned(f, opts...)
		assert.ErrorIs(t, err, ErrInvalidOption, name)
	}
	_, err := NewPartitioned(nil, WithPartition("a", 1))
	assert.ErrorIs(t, err, ErrInvalidOption)
}

// TestPartitionedSharesUnderContention runs a deterministic discrete-time
// model: 150 live and 150 batch clients saturate a limit of 100; every
// tick, finished requests (held 1 to 10 ticks) release and every idle
// client tries again, in a random order. Each partition must get its share
// of the admitted work, ±5 points.
func TestPartitionedSharesUnderContention(t *testing.T) {
	t.Parallel()
	clock := newFakeClock()
	p := newPartitioned(t, 100, WithClock(clock.Now))
	rng := rand.New(rand.NewPCG(3, 4))

	type request struct {
		tok   Token
		name  string
		until int
	}
	var running []request
	work := map[string]int{} // ticks of admitted work per partition
	idle := map[string]int{"live": 150, "batch": 150}
	const ticks = 600
	for tick := range ticks {
		clock.Advance(ms)
		kept := running[:0]
		for _, h := range running {
			if h.until <= tick {
				idle[h.name]++
				h.tok.Success()
				continue
			}
			kept = append(kept, h)
		}
		running = kept
		// Everyone idle tries once, interleaved at random.
		var tries []string
		for _, name := range []string{"live", "batch"} {
			for range idle[name] {
				tries = append(tries, name)
			}
		}
		rng.Shuffle(len(tries), func(i, j int) { tries[i], tries[j] = tries[j], tries[i] })
		for _, name := range tries {
			tok, err := p.AcquirePartition(t.Context(), name)
			if err != nil {
				continue
			}
			hold := 1 + rng.IntN(10)
			idle[name]--
			if tick >= ticks/10 { // skip the warm-up
				work[name] += hold
			}
			running = append(running, request{tok: tok, name: name, until: tick + hold})
			require.LessOrEqual(t, p.InFlight(), 100)
		}
	}
	total := float64(work["live"] + work["batch"])
	live, batch := float64(work["live"])/total, float64(work["batch"])/total
	t.Logf("live %.3f, batch %.3f of %v slot-ticks", live, batch, total)
	assert.InDelta(t, 0.9, live, 0.05)
	assert.InDelta(t, 0.1, batch, 0.05)
}

// TestPartitionedConcurrent checks with real goroutines and -race that the
// total in-flight count never exceeds the limit and no token leaks.
func TestPartitionedConcurrent(t *testing.T) {
	t.Parallel()
	p := newPartitioned(t, 10)
	var wg sync.WaitGroup
	var over atomic.Int64
	for g := range 16 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			name := []string{"live", "batch", "other"}[g%3]
			for range 1000 {
				tok, err := p.AcquirePartition(t.Context(), name)
				if err != nil {
					continue
				}
				if p.InFlight() > 10 {
					over.Add(1)
				}
				tok.Success()
			}
		}()
	}
	wg.Wait()
	assert.Zero(t, over.Load())
	assert.Zero(t, p.InFlight())
}

func TestPartitionedReportsItsPartitions(t *testing.T) {
	t.Parallel()
	p := newPartitioned(t, 10)
	assert.Equal(t, []string{"live", "batch"}, p.Partitions())
	share, ok := p.Share("batch")
	assert.True(t, ok)
	assert.Equal(t, 0.1, share)
	_, ok = p.Share("other")
	assert.False(t, ok)
}

// TestPartitionedSmallLimitNeverLocksOut: at a limit of 1, shares of 0.9
// and 0.1 reserve no whole slot; a partition refused while the other
// held the only slot must get it once it is free (a reservation of 0.1
// slot used to refuse both for ever).
func TestPartitionedSmallLimitNeverLocksOut(t *testing.T) {
	t.Parallel()
	p := newPartitioned(t, 1)
	batch := acquireN(t, p, "batch", 1)
	_, err := p.AcquirePartition(t.Context(), "live")
	require.ErrorIs(t, err, ErrLimitExceeded)
	_, err = p.AcquirePartition(t.Context(), "batch")
	require.ErrorIs(t, err, ErrLimitExceeded)
	batch[0].Success()
	live, err := p.AcquirePartition(t.Context(), "live")
	require.NoError(t, err, "both partitions refused with nothing in flight")
	live.Success()
}

// TestPartitionedQuietRefusalReservesNothing: a quiet refusal (a caller
// that does not know yet whether it has work) leaves borrowers alone;
// Want reserves the share as a refusal does.
func TestPartitionedQuietRefusalReservesNothing(t *testing.T) {
	t.Parallel()
	p := newPartitioned(t, 10)
	batch := acquireN(t, p, "batch", 10) // borrows live's idle share
	_, err := p.AcquirePartitionQuietly(t.Context(), "live")
	require.ErrorIs(t, err, ErrLimitExceeded)
	batch[0].Success()
	batch[0], err = p.AcquirePartition(t.Context(), "batch")
	require.NoError(t, err, "a quiet refusal reserved live's share")
	p.Want("live")
	batch[0].Success()
	_, err = p.AcquirePartition(t.Context(), "batch")
	require.ErrorIs(t, err, ErrLimitExceeded, "Want did not reserve live's share")
	tok, err := p.AcquirePartitionQuietly(t.Context(), "live")
	require.NoError(t, err)
	tok.Success()
	for _, b := range batch[1:] {
		b.Success()
	}
}
