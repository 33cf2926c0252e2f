package pool

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/shepherd-go/shepherd/internal/redistest"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// A planner frozen while it plans (a GC pause, SIGSTOP) loses its lease;
// another node plans meanwhile. When the first wakes with its late plan,
// every write of it is refused: no key it planned starts, none stops.
func TestScheduleRefusesAPausedPlannersLatePlan(t *testing.T) {
	t.Parallel()
	testPausedPlannerRefused(t)
}

// On a pool of several shards, each shard refuses the late planner's
// writes of its keys, by its own lease (schedule_shard.go).
func TestShardedScheduleRefusesAPausedPlannersLatePlan(t *testing.T) {
	t.Parallel()
	testPausedPlannerRefused(t, WithShards(3))
}

func testPausedPlannerRefused(t *testing.T, opts ...NodeOption) {
	pool := redistest.Name(t)
	ctx := testCtx(t, 60*time.Second)
	host := addNode(t, srv.NewClient(), pool, opts...)
	rec := newRecorder()
	addWorkers(t, host, rec, 2)
	for i := range 3 {
		require.NoError(t, host.DispatchJob(ctx, keyN(i), []byte("x")))
	}

	stale := addNode(t, srv.NewClient(), pool, WithClientOnly())
	late := &producer{name: "fenced", block: make(chan struct{})}
	late.set(&JobPlan{Jobs: jobsOf("late", "late-1", "late-2"), Stop: []string{keyN(0)}}, nil)
	require.NoError(t, stale.Schedule(ctx, late, 50*time.Millisecond))
	require.Eventually(t, func() bool { return late.inPlan.Load() == 1 }, 10*time.Second, time.Millisecond)

	// Freeze the planner's lease calls, as a paused process makes none;
	// another node takes the schedule over once the lease lapses.
	stale.test.leasesPaused.Store(true)
	fresh := addNode(t, srv.NewClient(), pool, WithClientOnly())
	next := &producer{name: "fenced"}
	next.set(&JobPlan{Jobs: jobsOf("fresh", "fresh-1")}, nil)
	require.NoError(t, fresh.Schedule(ctx, next, 50*time.Millisecond))
	waitPlans(t, host, next, 1)
	info, _ := scheduleInfo(t, host, "fenced")
	assert.Equal(t, fresh.ID(), info.Planner)

	// The stale planner wakes up and applies its plan.
	close(late.block)
	require.Eventually(t, func() bool { return late.inPlan.Load() == 0 }, 10*time.Second, time.Millisecond)
	waitPlans(t, host, next, 2) // give the late writes time to land, had they been let through
	running := rec.runningKeys()
	assert.NotContains(t, running, "late-1", "a late plan's dispatch was accepted")
	assert.NotContains(t, running, "late-2")
	assert.Contains(t, running, keyN(0), "a late plan's stop was accepted")
	assert.Contains(t, running, "fresh-1")
	stale.test.leasesPaused.Store(false)
	info, _ = scheduleInfo(t, host, "fenced")
	assert.Equal(t, fresh.ID(), info.Planner, "the woken planner took the lease back")
}

// The fence is checked by the scripts themselves: each of a planner's
// writes carrying a token that no longer holds is refused.
func TestFencedWritesAreRefused(t *testing.T) {
	t.Parallel()
	pool := redistest.Name(t)
	ctx := testCtx(t, 30*time.Second)
	n := addNode(t, srv.Client(), pool)
	rec := newRecorder()
	addWorkers(t, n, rec, 1)
	require.NoError(t, n.DispatchJob(ctx, "running", []byte("x")))
	f := fence{key: n.lay.plan("nobody"), token: "someone:1"}
	assert.ErrorIs(t, n.dispatchJob(ctx, "new", nil, f), errFenced)
	assert.ErrorIs(t, n.stopJob(ctx, "running", f), errFenced)
	assert.ErrorIs(t, n.notifyWorker(ctx, "running", []byte("n"), f), errFenced)
	assert.Equal(t, map[string]int{"running": 1}, rec.runningKeys())
	_, err := n.Job(ctx, "new")
	assert.ErrorIs(t, err, ErrJobNotFound)
}

func TestScheduleEndsWhenItsProducerSaysSo(t *testing.T) {
	t.Parallel()
	pool := redistest.Name(t)
	ctx := testCtx(t, 60*time.Second)
	n := addNode(t, srv.Client(), pool)
	rec := newRecorder()
	addWorkers(t, n, rec, 1)
	p := &producer{name: "once"}
	p.set(&JobPlan{Jobs: jobsOf("x", "final")}, ErrEndSchedule)
	require.NoError(t, n.Schedule(ctx, p, 20*time.Millisecond))
	require.Eventually(t, func() bool {
		_, ok := scheduleInfo(t, n, "once")
		return !ok && p.calls.Load() == 1
	}, 10*time.Second, 5*time.Millisecond)
	assert.Equal(t, map[string]int{"final": 1}, rec.runningKeys(), "the final plan is applied; its jobs keep running")
	// The planner stopped: no further Plan call within ten intervals.
	time.Sleep(200 * time.Millisecond)
	assert.EqualValues(t, 1, p.calls.Load())
	exists, err := n.rdb.Exists(ctx, n.lay.plan("once"), n.lay.planKeys("once")).Result()
	require.NoError(t, err)
	assert.Zero(t, exists)
}

func TestUnscheduleStopsEveryPlanner(t *testing.T) {
	t.Parallel()
	pool := redistest.Name(t)
	ctx := testCtx(t, 60*time.Second)
	n := addNode(t, srv.Client(), pool)
	addWorkers(t, n, newRecorder(), 1)
	p := &producer{name: "gone"}
	p.set(&JobPlan{Jobs: jobsOf("x", "a")}, nil)
	require.NoError(t, n.Schedule(ctx, p, 20*time.Millisecond))
	waitPlans(t, n, p, 1)
	require.NoError(t, Unschedule(ctx, srv.Client(), pool, "gone"))
	_, ok := scheduleInfo(t, n, "gone")
	assert.False(t, ok)
	calls := p.calls.Load()
	// Planning stops within an interval plus the lease call under way.
	require.Eventually(t, func() bool {
		c := p.calls.Load()
		time.Sleep(100 * time.Millisecond)
		return p.calls.Load() == c
	}, 5*time.Second, time.Millisecond)
	assert.LessOrEqual(t, p.calls.Load(), calls+1)
	assert.ErrorIs(t, n.Unschedule(ctx, "gone"), ErrNoSchedule)
	assert.ErrorIs(t, Unschedule(ctx, srv.Client(), pool, "never"), ErrNoSchedule)

	// The same name can be scheduled again: a new schedule.
	require.NoError(t, n.Schedule(ctx, p, 20*time.Millisecond))
	waitPlans(t, n, p, 1)
}

func TestScheduleRejectsBadInput(t *testing.T) {
	t.Parallel()
	pool := redistest.Name(t)
	ctx := testCtx(t, 30*time.Second)
	n := addNode(t, srv.Client(), pool, WithClientOnly())
	ok := &producer{name: "ok"}
	for name, err := range map[string]error{
		"nil producer": n.Schedule(ctx, nil, time.Second),
		"empty name":   n.Schedule(ctx, &producer{}, time.Second),
		"control char": n.Schedule(ctx, &producer{name: "a\nb"}, time.Second),
		"interval":     n.Schedule(ctx, ok, time.Millisecond),
		"nil option":   n.Schedule(ctx, ok, time.Second, nil),
		"rate":         n.Schedule(ctx, ok, time.Second, WithPlanRate(0)),
		"concurrency":  n.Schedule(ctx, ok, time.Second, WithPlanConcurrency(-1)),
		"change":       n.Schedule(ctx, ok, time.Second, WithPayloadChange(7)),
	} {
		assert.ErrorIs(t, err, ErrInvalidOption, name)
	}
	st, err := n.Stats(ctx)
	require.NoError(t, err)
	assert.Empty(t, st.Schedules, "a refused Schedule stored nothing")
	_, err = n.NewTicker(ctx, "", time.Second)
	assert.ErrorIs(t, err, ErrInvalidOption)
	_, err = n.NewTicker(ctx, "t", time.Millisecond)
	assert.ErrorIs(t, err, ErrInvalidOption)
	require.NoError(t, n.Close(ctx))
	assert.ErrorIs(t, n.Schedule(ctx, ok, time.Second), ErrNodeClosed)
	_, err = n.NewTicker(ctx, "t", time.Second)
	assert.ErrorIs(t, err, ErrNodeClosed)
}

// A plan's starts are spread at WithPlanRate, and a plan whose planner
// loses its lease midway is abandoned, the rest left to the next
// planner.
func TestSchedulePacesItsStarts(t *testing.T) {
	t.Parallel()
	pool := redistest.Name(t)
	ctx := testCtx(t, 60*time.Second)
	n := addNode(t, srv.Client(), pool)
	rec := newRecorder()
	addWorkers(t, n, rec, 2)
	p := &producer{name: "paced"}
	keys := make([]string, 60)
	for i := range keys {
		keys[i] = keyN(i)
	}
	p.set(&JobPlan{Jobs: jobsOf("x", keys...)}, nil)
	began := time.Now()
	require.NoError(t, n.Schedule(ctx, p, time.Hour, WithPlanRate(100)))
	require.Eventually(t, func() bool { return len(rec.runningKeys()) == len(keys) }, 20*time.Second, 5*time.Millisecond)
	took := time.Since(began)
	// 60 starts at 100 a second: the last one no sooner than 590 ms in.
	assert.GreaterOrEqual(t, took, 590*time.Millisecond)
	t.Logf("60 starts at WithPlanRate(100) took %v", took)
}

func TestSchedulePlanPanicIsAnError(t *testing.T) {
	t.Parallel()
	pool := redistest.Name(t)
	ctx := testCtx(t, 30*time.Second)
	n := addNode(t, srv.Client(), pool, WithClientOnly())
	require.NoError(t, n.Schedule(ctx, panicky{}, 20*time.Millisecond))
	require.Eventually(t, func() bool {
		info, _ := scheduleInfo(t, n, "panicky")
		return info.LastError != ""
	}, 10*time.Second, 5*time.Millisecond)
	info, _ := scheduleInfo(t, n, "panicky")
	assert.Contains(t, info.LastError, "Plan panicked: no inventory")
}

type panicky struct{}

func (panicky) Name() string { return "panicky" }
func (panicky) Plan(context.Context) (*JobPlan, error) {
	panic(errors.New("no inventory"))
}
