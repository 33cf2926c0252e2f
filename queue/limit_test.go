package queue

import (
	"context"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/shepherd-go/shepherd/internal/redistest"
	"github.com/shepherd-go/shepherd/limit"
)

// scripted is a limit.Algorithm whose limit the test sets; it records
// the samples it is fed.
type scripted struct {
	limit   atomic.Int64
	mu      sync.Mutex
	samples []limit.Sample
}

func (a *scripted) Update(s limit.Sample) int {
	a.mu.Lock()
	a.samples = append(a.samples, s)
	a.mu.Unlock()
	return int(a.limit.Load())
}

func (a *scripted) Limit() int { return int(a.limit.Load()) }

func (a *scripted) got() []limit.Sample {
	a.mu.Lock()
	defer a.mu.Unlock()
	return append([]limit.Sample(nil), a.samples...)
}

func TestConcurrencyLimitBoundsTakesAndLearnsFromAttempts(t *testing.T) {
	t.Parallel()
	name := redistest.Name(t)
	q := open(t, name)
	ctx := testCtx(t, 30*time.Second)
	alg := &scripted{}
	alg.limit.Store(2)
	var running, peak, laters atomic.Int64
	s := serve(t, q, func(ctx context.Context, t *Task) ([]byte, error) {
		n := running.Add(1)
		defer running.Add(-1)
		for {
			p := peak.Load()
			if n <= p || peak.CompareAndSwap(p, n) {
				break
			}
		}
		switch string(t.Payload) {
		case "later":
			if laters.Add(1) == 1 { // RetryLater uses no attempt: count the calls
				return nil, RetryLater(time.Millisecond, context.DeadlineExceeded)
			}
		case "slow":
			if t.Attempt == 1 {
				<-ctx.Done()
				return nil, ctx.Err()
			}
		}
		time.Sleep(5 * time.Millisecond)
		return nil, nil
	}, WithWorkers(6), WithConcurrencyLimit(alg, 1), fastRetries)
	assert.Equal(t, 2, s.Limit())
	var fs []*Future
	for range 20 {
		f, err := q.Submit(ctx, []byte("x"))
		require.NoError(t, err)
		fs = append(fs, f)
	}
	// Another process sees what the limit leaves: never more than 2 in
	// flight, though 6 workers are idle.
	stats := open(t, name)
	for _, f := range fs {
		st, err := stats.Stats(ctx)
		require.NoError(t, err)
		assert.LessOrEqual(t, st.InFlight, int64(2), "a task was taken beyond the limit")
		_, err = wait(t, f, 10*time.Second)
		require.NoError(t, err)
	}
	assert.Equal(t, int64(2), peak.Load())
	assert.Len(t, alg.got(), 20, "one sample per attempt")
	for _, smp := range alg.got() {
		assert.Positive(t, smp.RTT)
		assert.False(t, smp.Dropped)
		assert.GreaterOrEqual(t, smp.InFlight, 1)
		assert.LessOrEqual(t, smp.InFlight, 2)
	}

	// A higher limit lets more in, never beyond the workers; RetryLater
	// and timeouts are drops.
	alg.limit.Store(100)
	peak.Store(0)
	fs = fs[:0]
	for range 30 {
		f, err := q.Submit(ctx, []byte("x"))
		require.NoError(t, err)
		fs = append(fs, f)
	}
	for _, p := range []string{"later", "slow"} {
		f, err := q.Submit(ctx, []byte(p), WithTimeout(50*time.Millisecond))
		require.NoError(t, err)
		fs = append(fs, f)
	}
	for _, f := range fs {
		_, err := wait(t, f, 10*time.Second)
		require.NoError(t, err)
	}
	assert.Greater(t, peak.Load(), int64(2))
	assert.LessOrEqual(t, peak.Load(), int64(6))
	assert.Equal(t, 6, s.Limit(), "the limit is reported within the workers")
	drops := 0
	for _, smp := range alg.got() {
		if smp.Dropped {
			drops++
		}
	}
	assert.Equal(t, 2, drops, "RetryLater and a timeout are drops")
	// The process's record shows its limit as of its last keep-alive.
	q.kickKeepAlive()
	require.Eventually(t, func() bool {
		st, err := stats.Stats(ctx)
		if err != nil {
			return false
		}
		for _, p := range st.Processes {
			if p.ID == q.Process() {
				return p.Limit == 6
			}
		}
		return false
	}, 5*time.Second, 5*time.Millisecond, "the process's record does not show its limit")
}

func TestDefaultConcurrencyLimitRuns(t *testing.T) {
	t.Parallel()
	q := open(t, redistest.Name(t))
	ctx := testCtx(t, 30*time.Second)
	s := serve(t, q, echo, WithWorkers(4), WithConcurrencyLimit(nil, 2))
	assert.Equal(t, 2, s.Limit(), "Gradient2 starts at the floor")
	var fs []*Future
	for range 50 {
		f, err := q.Submit(ctx, []byte("x"))
		require.NoError(t, err)
		fs = append(fs, f)
	}
	for _, f := range fs {
		_, err := wait(t, f, 10*time.Second)
		require.NoError(t, err)
	}
	assert.GreaterOrEqual(t, s.Limit(), 2)
	assert.LessOrEqual(t, s.Limit(), 4)

	for _, opts := range [][]ServeOption{
		{WithConcurrencyLimit(nil, 0)},
		{WithWorkers(2), WithConcurrencyLimit(nil, 3)},
		{WithConcurrencyLimit(nil, 1), WithPrefetch(1)},
	} {
		_, err := open(t, redistest.Name(t)).Serve(echo, opts...)
		assert.ErrorIs(t, err, ErrInvalidOption)
	}
}

// running counts a handler's calls in progress and the most seen at once.
type running struct{ now, peak atomic.Int64 }

func (r *running) enter() {
	n := r.now.Add(1)
	for p := r.peak.Load(); n > p && !r.peak.CompareAndSwap(p, n); p = r.peak.Load() {
	}
}

func (r *running) exit() { r.now.Add(-1) }

func submitN(t *testing.T, ctx context.Context, q *Queue, n int, payload string) []*Future {
	t.Helper()
	fs := make([]*Future, 0, n)
	for range n {
		f, err := q.Submit(ctx, []byte(payload))
		require.NoError(t, err)
		fs = append(fs, f)
	}
	return fs
}

// liveBatch returns a Limit fixed at n with two partitions: live with
// the share live, batch with the rest.
func liveBatch(t *testing.T, n int, live float64) *Limit {
	t.Helper()
	fixed, err := limit.NewFixed(n)
	require.NoError(t, err)
	l, err := NewLimit(fixed, limit.WithPartition("live", live), limit.WithPartition("batch", 1-live))
	require.NoError(t, err)
	return l
}

// TestSharedLimitBoundsServersTogether runs two queues' servers, 6
// workers each, within one Limit of 3: together they never run more than
// 3 tasks at once, however their takes race, and both get work done.
func TestSharedLimitBoundsServersTogether(t *testing.T) {
	t.Parallel()
	ctx := testCtx(t, 30*time.Second)
	l := liveBatch(t, 3, 0.5)
	var all running
	h := func(ctx context.Context, t *Task) ([]byte, error) {
		all.enter()
		defer all.exit()
		time.Sleep(5 * time.Millisecond)
		return nil, nil
	}
	live, batch := open(t, redistest.Name(t)+"-live"), open(t, redistest.Name(t)+"-batch")
	sl := serve(t, live, h, WithWorkers(6), WithLimit(l, "live"))
	sb := serve(t, batch, h, WithWorkers(6), WithLimit(l, "batch"))
	fs := append(submitN(t, ctx, live, 150, "l"), submitN(t, ctx, batch, 150, "b")...)
	for _, f := range fs {
		_, err := wait(t, f, 20*time.Second)
		require.NoError(t, err)
	}
	assert.Equal(t, int64(3), all.peak.Load(), "the servers together ran more (or fewer) than the limit at once")
	assert.Equal(t, 3, sl.Limit())
	assert.Equal(t, 3, sb.Limit())
	// The last take may hold permits for the idle workers a moment
	// after the last outcome was published.
	assert.Eventually(t, func() bool { return l.InFlight() == 0 }, 5*time.Second, time.Millisecond, "a permit was not given back")
}

// TestSharedLimitPartitionsBorrowAndReclaim: batch alone borrows live's
// idle share; once live has tasks waiting it gets its share back as
// batch's tasks end.
func TestSharedLimitPartitionsBorrowAndReclaim(t *testing.T) {
	t.Parallel()
	ctx := testCtx(t, 30*time.Second)
	l := liveBatch(t, 4, 0.75)
	var liveRun, batchRun running
	handler := func(r *running) Handler {
		return func(ctx context.Context, t *Task) ([]byte, error) {
			r.enter()
			defer r.exit()
			time.Sleep(20 * time.Millisecond)
			return nil, nil
		}
	}
	live, batch := open(t, redistest.Name(t)+"-live"), open(t, redistest.Name(t)+"-batch")
	serve(t, live, handler(&liveRun), WithWorkers(4), WithLimit(l, "live"))
	serve(t, batch, handler(&batchRun), WithWorkers(4), WithLimit(l, "batch"))
	bf := submitN(t, ctx, batch, 800, "b")
	require.Eventually(t, func() bool { return batchRun.now.Load() == 4 }, 5*time.Second, time.Millisecond,
		"batch alone does not borrow live's idle share")
	// And keeps it while live's server, idle, looks for tasks (once a
	// second): looking is not wanting.
	low, samples := 0, 0
	for end := time.Now().Add(2500 * time.Millisecond); time.Now().Before(end); samples++ {
		if batchRun.now.Load() < 3 {
			low++
		}
		time.Sleep(5 * time.Millisecond)
	}
	// A worker between two tasks (its outcome recorded, the next taken:
	// a Redis round trip and the feed's batching) also counts as a dip:
	// ~10% of the samples under -race on a busy 2-core machine, up to
	// the threshold of 10% the test first had (it failed so in -race runs).
	// Losing the share to live's looks, the bug this guards against, shows
	// as 75-98% (seen with demand ignored in Limit.acquire).
	t.Logf("batch below 3 in %d of %d samples", low, samples)
	assert.Less(t, low, samples/3, "batch lost live's idle share %d times in %d samples", low, samples)
	lf := submitN(t, ctx, live, 100, "l")
	require.Eventually(t, func() bool { return liveRun.now.Load() == 3 && batchRun.now.Load() == 1 }, 5*time.Second, time.Millisecond,
		"live does not get its share back (live %d, batch %d)", liveRun.now.Load(), batchRun.now.Load())
	parts := l.Partitions()
	require.Len(t, parts, 2)
	assert.Equal(t, "batch", parts[0].Name)
	assert.Equal(t, 0.25, parts[0].Share)
	assert.Equal(t, "live", parts[1].Name)
	for _, f := range lf {
		_, err := wait(t, f, 20*time.Second)
		require.NoError(t, err)
	}
	for _, f := range bf {
		_, err := wait(t, f, 20*time.Second)
		require.NoError(t, err)
	}
	// The last take may hold permits for the idle workers a moment
	// after the last outcome was published.
	assert.Eventually(t, func() bool { return l.InFlight() == 0 }, 5*time.Second, time.Millisecond, "a permit was not given back")
}

func TestLimitOptions(t *testing.T) {
	t.Parallel()
	_, err := NewLimit(nil, limit.WithPartition("a", 0.7), limit.WithPartition("b", 0.7))
	assert.ErrorIs(t, err, ErrInvalidOption)
	_, err = NewLimit(nil, limit.WithIdleWindow(-time.Second))
	assert.ErrorIs(t, err, ErrInvalidOption)
	assert.ErrorContains(t, err, "idle window")
	sole, err := NewLimit(nil)
	require.NoError(t, err)
	assert.Equal(t, 1, sole.Limit(), "the default algorithm starts at 1")
	assert.Equal(t, []LimitPartition{{Name: "", Share: 1}}, sole.Partitions())
	parted, err := NewLimit(nil, limit.WithPartition("live", 0.9))
	require.NoError(t, err)
	for _, opts := range [][]ServeOption{
		{WithLimit(nil, "")},
		{WithLimit(parted, "")},
		{WithLimit(parted, "batch")},
		{WithLimit(sole, ""), WithConcurrencyLimit(nil, 1)},
		{WithLimit(sole, ""), WithPrefetch(2)},
	} {
		_, err := open(t, redistest.Name(t)).Serve(echo, opts...)
		assert.ErrorIs(t, err, ErrInvalidOption)
	}
}

// TestSharedDefaultLimitServesBothPartitions: the default algorithm
// starts at 1, where shares of 0.9 and 0.1 are fractions of a slot; both
// queues must get their tasks done (they used to lock each other out).
func TestSharedDefaultLimitServesBothPartitions(t *testing.T) {
	t.Parallel()
	ctx := testCtx(t, 30*time.Second)
	l, err := NewLimit(nil, limit.WithPartition("live", 0.9), limit.WithPartition("batch", 0.1))
	require.NoError(t, err)
	live, batch := open(t, redistest.Name(t)+"-live"), open(t, redistest.Name(t)+"-batch")
	serve(t, live, echo, WithWorkers(4), WithLimit(l, "live"))
	serve(t, batch, echo, WithWorkers(4), WithLimit(l, "batch"))
	for _, f := range append(submitN(t, ctx, live, 100, "l"), submitN(t, ctx, batch, 100, "b")...) {
		_, err := wait(t, f, 10*time.Second)
		require.NoError(t, err)
	}
}

// TestDefaultLimitSurvivesFastRefusals drives the default algorithm on a
// virtual clock against a downstream that refuses at once (in 50µs, a
// drop) every call beyond its capacity of 16 and serves the others in
// 10ms, with a closed loop of callers always ready. Near-zero-latency
// drops must neither collapse the limit to its floor nor, taken for a
// fast downstream, push it to its ceiling.
func TestDefaultLimitSurvivesFastRefusals(t *testing.T) {
	t.Parallel()
	const (
		capacity = 16
		serve    = 10 * time.Millisecond
		refuse   = 50 * time.Microsecond
	)
	now := time.Unix(0, 0)
	alg, err := defaultLimitAlgorithm(1, 256, func() time.Time { return now })
	require.NoError(t, err)
	var (
		busy    []time.Time // ends of the calls being served
		served  int
		refused int
		limits  []int
	)
	for tick := 0; tick < 20000; tick++ { // 20s in 1ms ticks
		now = now.Add(time.Millisecond)
		kept := busy[:0]
		for _, end := range busy {
			if end.After(now) {
				kept = append(kept, end)
				continue
			}
			alg.Update(limit.Sample{RTT: serve, InFlight: len(busy)})
			if tick >= 5000 {
				served++
			}
		}
		busy = kept
		// Callers fill the limit; the downstream refuses past its capacity.
		for inflight := len(busy); inflight < alg.Limit(); inflight++ {
			if len(busy) >= capacity {
				alg.Update(limit.Sample{RTT: refuse, InFlight: inflight + 1, Dropped: true})
				if tick >= 5000 {
					refused++
				}
				continue
			}
			busy = append(busy, now.Add(serve))
		}
		if tick >= 5000 {
			limits = append(limits, alg.Limit())
		}
	}
	slices.Sort(limits)
	lo, med, hi := limits[len(limits)/100], limits[len(limits)/2], limits[len(limits)*99/100]
	rate := float64(served) / 15 / (capacity / serve.Seconds())
	t.Logf("limit p1/p50/p99 %d/%d/%d; served %.2f of the capacity; %d refused", lo, med, hi, rate, refused)
	assert.GreaterOrEqual(t, lo, capacity/4, "the limit collapsed")
	assert.LessOrEqual(t, hi, 2*capacity, "fast refusals pushed the limit up")
	assert.Greater(t, rate, 0.7, "too little of the capacity served")
}
