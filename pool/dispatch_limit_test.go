package pool

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/shepherd-go/shepherd/internal/redistest"
	"github.com/shepherd-go/shepherd/limit"
)

// TestDispatchLimitBacksOffWhenThePoolIsFull: a pool with no worker and
// room for 4 queued jobs, 64 producers. The admissions refused with
// ErrPoolFull shrink the limit, so that most producers wait for a permit
// (and give up, having sent nothing) instead of calling Redis again and
// again.
func TestDispatchLimitBacksOffWhenThePoolIsFull(t *testing.T) {
	t.Parallel()
	pool := redistest.Name(t)
	n := addNode(t, srv.Client(), pool, WithMaxQueuedJobs(4), WithDispatchLimit(nil, 300*time.Millisecond))
	assert.Equal(t, DispatchLimitStats{Limit: DefaultDispatchLimitInitial}, n.DispatchLimit())
	var full, limited, waited atomic.Int64
	var wg sync.WaitGroup
	for i := range 64 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
			defer cancel()
			for j := 0; ctx.Err() == nil; j++ {
				err := n.DispatchJob(ctx, keyN(i*1000+j), nil)
				switch {
				case errors.Is(err, ErrPoolFull):
					full.Add(1)
				case errors.Is(err, limit.ErrLimitExceeded):
					limited.Add(1)
				case errors.Is(err, context.DeadlineExceeded):
					waited.Add(1) // one of the 4 queued, waiting for a worker
				default:
					t.Errorf("DispatchJob: %v", err)
					return
				}
			}
		}()
	}
	wg.Wait()
	dl := n.DispatchLimit()
	t.Logf("full %d, limited %d, waited %d; limit at the end %d", full.Load(), limited.Load(), waited.Load(), dl.Limit)
	assert.LessOrEqual(t, dl.Limit, 5, "the limit did not back off to about the jobs the pool takes")
	assert.Positive(t, limited.Load(), "no producer was held back")
	// Without the limit, 64 producers calling for 2s get thousands of
	// refusals; with it, a few per permit.
	assert.Less(t, full.Load(), int64(500), "the producers kept hammering the full pool")
	assert.Zero(t, dl.InFlight)
	assert.Zero(t, dl.Waiting)
}

// TestDispatchLimitGrowsWhileJobsStart: while dispatches succeed with
// more producers than permits, the limit grows, and every job starts.
func TestDispatchLimitGrowsWhileJobsStart(t *testing.T) {
	t.Parallel()
	pool := redistest.Name(t)
	n := addNode(t, srv.Client(), pool, WithMaxQueuedJobs(10000), WithDispatchLimit(nil, 10*time.Second))
	rec := newRecorder()
	addWorkers(t, n, rec, 2)
	ctx := testCtx(t, 30*time.Second)
	var wg sync.WaitGroup
	for g := range 32 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for j := range 20 {
				assert.NoError(t, n.DispatchJob(ctx, keyN(g*100+j), nil))
			}
		}()
	}
	wg.Wait()
	assert.Len(t, rec.runningKeys(), 32*20)
	assert.Greater(t, n.DispatchLimit().Limit, DefaultDispatchLimitInitial)
}

// TestDispatchLimitWaitHonoursCtxAndSendsNothing: with a limit of 1 held
// by a dispatch waiting for a worker, a second DispatchJob waits for its
// permit until its ctx ends, and leaves nothing in Redis.
func TestDispatchLimitWaitHonoursCtxAndSendsNothing(t *testing.T) {
	t.Parallel()
	pool := redistest.Name(t)
	one, err := limit.NewFixed(1)
	require.NoError(t, err)
	n := addNode(t, srv.Client(), pool, WithDispatchLimit(one, time.Minute))
	held := make(chan error, 1)
	hctx, cancel := context.WithCancel(context.Background())
	go func() { held <- n.DispatchJob(hctx, "held", nil) }()
	require.Eventually(t, func() bool { return n.DispatchLimit().InFlight == 1 }, 5*time.Second, time.Millisecond)

	ctx, cancel2 := context.WithTimeout(context.Background(), 100*time.Millisecond)
	defer cancel2()
	t0 := time.Now()
	err = n.DispatchJob(ctx, "second", nil)
	assert.ErrorIs(t, err, context.DeadlineExceeded)
	assert.Less(t, time.Since(t0), 5*time.Second)
	keys, err := n.JobKeys(testCtx(t, 5*time.Second))
	require.NoError(t, err)
	assert.Equal(t, []string{"held"}, keys, "the waiting dispatch sent something")
	cancel()
	assert.ErrorIs(t, <-held, context.Canceled)
	assert.Equal(t, DispatchLimitStats{Limit: 1}, n.DispatchLimit())

	_, err = AddNode(testCtx(t, 5*time.Second), srv.Client(), pool, WithDispatchLimit(nil, 0))
	assert.ErrorIs(t, err, ErrInvalidOption)
}

// TestDispatchLimitBacksOffWhenRedisStalls: 32 producers dispatch
// within an AIMD limit of at most 16 while Redis freezes for 500ms. Only
// the calls holding a permit go to the frozen Redis, the others wait;
// those admissions, slower than the AIMD timeout, are drops, so once
// they return the limit has backed off; every dispatch succeeds.
func TestDispatchLimitBacksOffWhenRedisStalls(t *testing.T) {
	t.Parallel()
	// Calls that wait out the freeze, and calls whose deadline passes in
	// it (each fails, having withdrawn its job).
	for _, callTimeout := range []time.Duration{10 * time.Second, 200 * time.Millisecond} {
		t.Run(callTimeout.String(), func(t *testing.T) {
			t.Parallel()
			dispatchThroughAStall(t, callTimeout)
		})
	}
}

func dispatchThroughAStall(t *testing.T, callTimeout time.Duration) {
	own := redistest.Start(t)
	pool := redistest.Name(t)
	aimd, err := limit.NewAIMD(limit.WithAIMDInitial(8), limit.WithAIMDMax(16), limit.WithAIMDTimeout(DefaultDispatchSlow))
	require.NoError(t, err)
	low := &lowWater{Algorithm: aimd}
	n := addNode(t, own.Client(), pool, WithMaxQueuedJobs(100000), WithDispatchLimit(low, 10*time.Second))
	rec := newRecorder()
	addWorkers(t, n, rec, 2)
	ctx := testCtx(t, 30*time.Second)
	var (
		wg       sync.WaitGroup
		sent     atomic.Int64
		stop     atomic.Bool
		maxWait  atomic.Int64 // most calls waiting for a permit during the freeze
		inFreeze atomic.Int64 // most calls holding one
	)
	for g := range 32 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for j := 0; !stop.Load(); j++ {
				cctx, cancel := context.WithTimeout(ctx, callTimeout)
				err := n.DispatchJob(cctx, keyN(g*100000+j), nil)
				cancel()
				if errors.Is(err, context.DeadlineExceeded) && callTimeout < time.Second {
					continue
				}
				assert.NoError(t, err)
				sent.Add(1)
			}
		}()
	}
	require.Eventually(t, func() bool { return sent.Load() > 200 }, 10*time.Second, time.Millisecond)
	// The limit measures admissions, not the wait for Start: a freeze
	// slows only the admissions in flight when it begins (while Redis is
	// frozen no call ends, so no permit is handed out). Under load the
	// permit holders move in step (admissions go out in pipelines), and a
	// freeze may catch all of them waiting for their Start: no admission
	// is slow then (it failed so once in CI). So the freeze is tried up
	// to 5 times; slow admissions that do not lower the limit fail every
	// try.
	before, lowered := 0, false
	for try := 0; try < 5 && !lowered; try++ {
		before = n.DispatchLimit().Limit
		low.reset(before)
		frozen := make(chan error, 1)
		go func() { frozen <- own.Pause(500 * time.Millisecond) }()
		for deadline := time.Now().Add(450 * time.Millisecond); time.Now().Before(deadline); time.Sleep(5 * time.Millisecond) {
			dl := n.DispatchLimit()
			inFreeze.Store(max(inFreeze.Load(), int64(dl.InFlight)))
			maxWait.Store(max(maxWait.Load(), int64(dl.Waiting)))
		}
		require.NoError(t, <-frozen)
		// The frozen calls return, each a drop. The limit regrows by one
		// a fast admission, within milliseconds: its low water mark is
		// read from the algorithm (polling it missed the dip under -race).
		deadline := time.Now().Add(2 * time.Second)
		for !lowered && time.Now().Before(deadline) {
			lowered = low.lowest() < before
			time.Sleep(time.Millisecond) // polling interval
		}
	}
	require.True(t, lowered, "slow admissions did not lower the limit (%d) in 5 freezes", before)
	after := low.lowest()
	stop.Store(true)
	wg.Wait()
	t.Logf("limit %d before the freeze, down to %d after; during it %d calls held a permit, %d waited; %d dispatched",
		before, after, inFreeze.Load(), maxWait.Load(), sent.Load())
	assert.LessOrEqual(t, inFreeze.Load(), int64(16), "more calls than the limit went to the frozen Redis")
	assert.Positive(t, maxWait.Load(), "no producer was held back")
	assert.Eventually(t, func() bool { return len(rec.runningKeys()) == int(sent.Load()) }, 5*time.Second, 10*time.Millisecond,
		"a dispatch that returned nil did not start, or a failed one ran")
}

// lowWater is an Algorithm that remembers the lowest limit it returned
// since reset.
type lowWater struct {
	limit.Algorithm
	mu  sync.Mutex
	low int
}

func (l *lowWater) Update(s limit.Sample) int {
	v := l.Algorithm.Update(s)
	l.mu.Lock()
	l.low = min(l.low, v)
	l.mu.Unlock()
	return v
}

func (l *lowWater) reset(v int) {
	l.mu.Lock()
	l.low = v
	l.mu.Unlock()
}

func (l *lowWater) lowest() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.low
}
