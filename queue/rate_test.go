package queue

import (
	"context"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/shepherd-go/shepherd/internal/redistest"
)

// startTimes records when tasks started, by Redis's clock as the take
// script saw it (TaskInfo's Due is not enough; the attempt's begin time
// is in the attempt's value in active).
type startTimes struct {
	mu sync.Mutex
	at []time.Time
}

func (s *startTimes) add(at time.Time) {
	s.mu.Lock()
	s.at = append(s.at, at)
	s.mu.Unlock()
}

func (s *startTimes) list() []time.Time {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]time.Time(nil), s.at...)
}

// began reads the time the take script began the task's current
// attempt, from active (wire.go, "Running attempts").
func began(ctx context.Context, q *Queue, id string) time.Time {
	run := strings.Split(q.rdb.HGet(ctx, q.lay.active, id).Val(), "\n")
	if len(run) != runningParts {
		return time.Time{}
	}
	ms, _ := strconv.ParseInt(run[2], 10, 64)
	return time.UnixMilli(ms)
}

// maxInWindow is the most times within any window of length w.
func maxInWindow(at []time.Time, w time.Duration) int {
	best := 0
	for i := range at {
		n := 0
		for _, b := range at {
			if !b.Before(at[i]) && b.Sub(at[i]) < w {
				n++
			}
		}
		best = max(best, n)
	}
	return best
}

// A tenant's rate holds across two processes: no window of its period
// sees more starts than N plus its burst, and the tasks over the rate
// wait in Redis rather than fail.
func TestTenantRateHoldsAcrossProcesses(t *testing.T) {
	t.Parallel()
	name := redistest.Name(t)
	q1, q2 := open(t, name), open(t, name)
	ctx := testCtx(t, 60*time.Second)
	require.NoError(t, q1.SetTenant(ctx, "a", 100))
	r := Rate{N: 10, Per: 200 * time.Millisecond, Burst: 2}
	require.NoError(t, q1.SetTenantRate(ctx, "a", r))
	var s startTimes
	h := func(ctx context.Context, t *Task) ([]byte, error) {
		s.add(began(ctx, q1, t.ID))
		return nil, nil
	}
	serve(t, q1, h, WithWorkers(4))
	serve(t, q2, h, WithWorkers(4))
	const n = 40
	var fs []*Future
	for range n {
		f, err := q1.Submit(ctx, nil, WithTenant("a"))
		require.NoError(t, err)
		fs = append(fs, f)
	}
	for _, f := range fs {
		_, err := wait(t, f, 20*time.Second)
		require.NoError(t, err)
	}
	at := s.list()
	require.Len(t, at, n)
	got := maxInWindow(at, r.Per)
	t.Logf("most starts in a %v window: %d (rate %v)", r.Per, got, r)
	assert.LessOrEqual(t, got, r.N+r.Burst)
	first, last := at[0], at[0]
	for _, a := range at {
		if a.Before(first) {
			first = a
		}
		if a.After(last) {
			last = a
		}
	}
	// n starts: at most burst at once, then one every Per/N, the first
	// of them up to half of Per/N early (a start keeps its place when
	// it came that late, and an unused rate counts as that late).
	T := r.Per / time.Duration(r.N)
	assert.GreaterOrEqual(t, last.Sub(first), time.Duration(n-r.Burst)*T-T/2-time.Millisecond)
	ti := tenantOf(t, q1, "a")
	assert.Equal(t, r, ti.Rate)
}

// The queue's rate holds for all its tasks, tenanted or not, and
// removing it lets the waiting tasks start at once; no worker spins
// while tasks wait for the rate (a private Redis counts the calls).
func TestQueueRateAndItsRemoval(t *testing.T) {
	t.Parallel()
	own := redistest.Start(t)
	ctx := testCtx(t, 60*time.Second)
	q, err := Open(ctx, own.Client(), redistest.Name(t))
	require.NoError(t, err)
	t.Cleanup(func() { require.NoError(t, closeWithin(q)) })
	require.NoError(t, q.SetTenant(ctx, "a", 10))
	require.NoError(t, q.SetRate(ctx, Rate{N: 1, Per: time.Hour}))
	st, err := q.Stats(ctx)
	require.NoError(t, err)
	assert.Equal(t, Rate{N: 1, Per: time.Hour}, st.Rate)
	var started startTimes
	serve(t, q, func(ctx context.Context, t *Task) ([]byte, error) {
		started.add(time.Now())
		return nil, nil
	}, WithWorkers(4))
	var fs []*Future
	for i := range 6 {
		var opts []SubmitOption
		if i%2 == 0 {
			opts = append(opts, WithTenant("a"))
		}
		f, err := q.Submit(ctx, nil, opts...)
		require.NoError(t, err)
		fs = append(fs, f)
	}
	require.Eventually(t, func() bool { return len(started.list()) == 1 }, 5*time.Second, time.Millisecond)
	// The others wait for an hour: the script calls made meanwhile are
	// the keep-alives and the workers' once-a-second look, not a spin.
	before := scriptCalls(t, ctx, own.Client())
	time.Sleep(2 * time.Second)
	calls := scriptCalls(t, ctx, own.Client()) - before
	t.Logf("script calls in 2s while 5 tasks waited for the rate: %d", calls)
	assert.Less(t, calls, int64(30), "workers poll while tasks wait for the rate")
	assert.Len(t, started.list(), 1)
	require.NoError(t, q.SetRate(ctx, Rate{}))
	for _, f := range fs {
		_, err := wait(t, f, 5*time.Second)
		require.NoError(t, err)
	}
}

// scriptCalls is how many scripts rdb's server has run (EVALSHA and
// EVAL, from INFO commandstats).
func scriptCalls(t *testing.T, ctx context.Context, rdb redis.UniversalClient) int64 {
	t.Helper()
	info, err := rdb.Info(ctx, "commandstats").Result()
	require.NoError(t, err)
	var total int64
	for _, line := range strings.Split(info, "\n") {
		for _, cmd := range []string{"cmdstat_evalsha:calls=", "cmdstat_eval:calls="} {
			if rest, ok := strings.CutPrefix(strings.TrimSpace(line), cmd); ok {
				n, _ := strconv.ParseInt(strings.SplitN(rest, ",", 2)[0], 10, 64)
				total += n
			}
		}
	}
	return total
}

// A rate set while tasks wait for it takes effect at once; bad rates and
// unknown tenants are refused with nothing written.
func TestRateBadInputWritesNothing(t *testing.T) {
	t.Parallel()
	name := redistest.Name(t)
	q := open(t, name)
	ctx := testCtx(t, 20*time.Second)
	require.NoError(t, q.SetTenant(ctx, "a", 1))
	before := redistest.Keys(t, q.rdb, "shepherd:{"+name+"}:*")
	tenants, err := q.rdb.HGetAll(ctx, q.lay.tenants).Result()
	require.NoError(t, err)
	for _, bad := range []Rate{{N: 0, Per: time.Second}, {N: -1, Per: time.Second}, {N: 1, Per: 0},
		{N: 1, Per: -time.Second}, {N: 1, Per: 1500 * time.Microsecond}, {N: MaxRateN + 1, Per: time.Second},
		{N: 5, Per: time.Second, Burst: 6}, {N: 5, Per: time.Second, Burst: -1}} {
		assert.ErrorIs(t, q.SetRate(ctx, bad), ErrInvalidOption, "%+v", bad)
		assert.ErrorIs(t, q.SetTenantRate(ctx, "a", bad), ErrInvalidOption, "%+v", bad)
	}
	assert.ErrorIs(t, q.SetTenantRate(ctx, "made-up", Rate{N: 1, Per: time.Second}), ErrUnknownTenant)
	assert.ErrorIs(t, q.SetTenantRate(ctx, "", Rate{N: 1, Per: time.Second}), ErrInvalidOption)
	assert.Equal(t, before, redistest.Keys(t, q.rdb, "shepherd:{"+name+"}:*"))
	after, err := q.rdb.HGetAll(ctx, q.lay.tenants).Result()
	require.NoError(t, err)
	assert.Equal(t, tenants, after)
}

func TestParseRate(t *testing.T) {
	t.Parallel()
	for in, want := range map[string]Rate{
		"500/1s": {N: 500, Per: time.Second}, "10/1m+3": {N: 10, Per: time.Minute, Burst: 3},
		"none": {}, " 2/250ms ": {N: 2, Per: 250 * time.Millisecond},
	} {
		got, err := ParseRate(in)
		require.NoError(t, err, in)
		assert.Equal(t, want, got, in)
		if !want.IsZero() {
			back, err := ParseRate(got.String())
			require.NoError(t, err)
			assert.Equal(t, got, back, "String and ParseRate agree")
			assert.Equal(t, got, parseRate(got.spec()), "spec and parseRate agree")
		}
	}
	for _, bad := range []string{"", "0", "500", "x/1s", "5/1x", "0/1s", "5/0s", "5/1s+0", "5/1s+x", "5/1s+6", "-5/1s"} {
		_, err := ParseRate(bad)
		assert.ErrorIs(t, err, ErrInvalidOption, bad)
	}
}

// A rate with a burst of 1 starts tasks Per/N apart on average, within
// 1 % over 10 s: a take that comes late (the wait is whole milliseconds
// and the feed wakes after it) keeps its place when it is late by less
// than Per/N/2, rather than losing its lateness, which used to leave
// each gap about a millisecond long (5 % under the rate at 50/s). A
// start later than that (this machine's stall, not the rate's) loses
// the rest: the mean is taken over the time less those stalls. No
// window of Per sees more than N + Burst starts.
func TestRateKeepsItsAverage(t *testing.T) {
	t.Parallel()
	q := open(t, redistest.Name(t))
	ctx := testCtx(t, 60*time.Second)
	r := Rate{N: 50, Per: time.Second, Burst: 1}
	require.NoError(t, q.SetRate(ctx, r))
	const n = 501 // 500 gaps: 10 s at the rate
	for range n + 20 {
		_, err := q.Submit(ctx, nil)
		require.NoError(t, err)
	}
	var s startTimes
	serve(t, q, func(ctx context.Context, t *Task) ([]byte, error) {
		s.add(began(ctx, q, t.ID))
		return nil, nil
	}, WithWorkers(4))
	require.Eventually(t, func() bool { return len(s.list()) >= n }, 30*time.Second, 10*time.Millisecond)
	at := s.list()
	slices.SortFunc(at, time.Time.Compare)
	at = at[:n]
	want := r.Per / time.Duration(r.N)
	var stalled time.Duration
	for i := 1; i < n; i++ {
		stalled += max(at[i].Sub(at[i-1])-want*3/2, 0)
	}
	span := at[n-1].Sub(at[0])
	gap := (span - stalled) / (n - 1)
	t.Logf("rate %v: mean gap %v over %v, %v without %v of stalls (want %v)", r, span/(n-1), span, gap, stalled, want)
	assert.InDelta(t, float64(want), float64(gap), 0.01*float64(want), "starts are not Per/N apart on average")
	assert.LessOrEqual(t, maxInWindow(at, r.Per), r.N+r.EffectiveBurst())
}
