package queue

import (
	"context"
	"fmt"
	"sort"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/shepherd-go/shepherd/internal/redistest"
)

// tickRuns records the first attempts of ticks' tasks: a tick enqueued
// twice runs a first attempt twice.
type tickRuns struct {
	mu       sync.Mutex
	first    map[string]int    // task id → first attempts
	payloads map[string]string // task id → payload
}

func newTickRuns() *tickRuns {
	return &tickRuns{first: map[string]int{}, payloads: map[string]string{}}
}

func (r *tickRuns) handle(_ context.Context, t *Task) ([]byte, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if t.Attempt == 1 {
		r.first[t.ID]++
	}
	r.payloads[t.ID] = string(t.Payload)
	return nil, nil
}

// ticks returns the ticks of schedule that ran, in order.
func (r *tickRuns) ticks(schedule string) []time.Time {
	r.mu.Lock()
	defer r.mu.Unlock()
	var out []time.Time
	for id := range r.first {
		if name, at, ok := TickOf(id); ok && name == schedule {
			out = append(out, at)
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Before(out[j]) })
	return out
}

// checkOnceInOrder checks that each tick of schedule ran its first
// attempt once, every period from the first to the last.
func (r *tickRuns) checkOnceInOrder(t *testing.T, schedule string, period time.Duration) []time.Time {
	t.Helper()
	ticks := r.ticks(schedule)
	r.mu.Lock()
	defer r.mu.Unlock()
	for i, at := range ticks {
		assert.Equal(t, 1, r.first[tickID(schedule, at)], "%s: tick %v ran its first attempt %d times", schedule, at, r.first[tickID(schedule, at)])
		if i > 0 {
			assert.Equal(t, period, at.Sub(ticks[i-1]), "%s: a gap before tick %v", schedule, at)
		}
	}
	return ticks
}

// redisNow reads Redis's clock.
func redisNow(t *testing.T, rdb redis.UniversalClient) time.Time {
	t.Helper()
	now, err := rdb.Time(context.Background()).Result()
	require.NoError(t, err)
	return now
}

func schedule(t *testing.T, c *Client, name string) ScheduleInfo {
	t.Helper()
	all, err := c.Schedules(testCtx(t, 5*time.Second))
	require.NoError(t, err)
	for _, s := range all {
		if s.Name == name {
			return s
		}
	}
	t.Fatalf("no schedule %q", name)
	return ScheduleInfo{}
}

// oneMs keeps a tick's task for a millisecond after it finishes: its id
// is free again at once, so only the schedule's last tick stops a late
// scheduler from enqueueing the tick a second time.
var oneMs = WithTaskOptions(WithRetention(time.Millisecond))

// Three processes race to enqueue every tick of 11 schedules: each tick
// runs once, none is skipped.
func TestEachTickOnceAcrossThreeRacingServers(t *testing.T) {
	t.Parallel()
	name := redistest.Name(t)
	ctx := testCtx(t, 60*time.Second)
	runs := newTickRuns()
	var servers []*Server
	var qs []*Queue
	for range 3 {
		q := open(t, name)
		qs = append(qs, q)
		servers = append(servers, serve(t, q, runs.handle, WithWorkers(4)))
	}
	names := []string{"cron"}
	require.NoError(t, qs[0].SetSchedule(ctx, "cron", "* * * * * *", []byte("c"), oneMs))
	for i := range 10 {
		n := fmt.Sprint("every-", i)
		names = append(names, n)
		require.NoError(t, qs[i%3].SetSchedule(ctx, n, "@every 1s", []byte(n), oneMs))
	}
	require.Eventually(t, func() bool {
		for _, n := range names {
			if len(runs.ticks(n)) < 5 {
				return false
			}
		}
		return true
	}, 30*time.Second, 50*time.Millisecond, "the schedules did not tick five times each")
	for _, s := range servers {
		require.NoError(t, s.Stop(ctx))
	}
	for _, n := range names {
		ticks := runs.checkOnceInOrder(t, n, time.Second)
		assert.GreaterOrEqual(t, len(ticks), 5, n)
	}
}

// A serving process killed (SIGKILL) while it enqueues the ticks: the
// process that serves next enqueues the following ones, none skipped.
func TestAKilledServersTicksAreTakenOver(t *testing.T) {
	t.Parallel()
	name := redistest.Name(t)
	ctx := testCtx(t, 60*time.Second)
	c := startChild(t, name, time.Second, 2, 0)
	q := open(t, name)
	require.NoError(t, q.SetSchedule(ctx, "s", "@every 1s", nil))
	first := time.Time{}
	require.Eventually(t, func() bool {
		s := schedule(t, &q.Client, "s")
		if first.IsZero() {
			first = s.LastTick
		}
		return !first.IsZero() && s.LastTick.Sub(first) >= 2*time.Second
	}, 20*time.Second, 20*time.Millisecond, "the child enqueued no ticks")
	require.NoError(t, c.cmd.Process.Signal(syscall.SIGKILL))
	_ = c.cmd.Wait()
	killed := schedule(t, &q.Client, "s").LastTick
	runs := newTickRuns()
	serve(t, q, runs.handle, WithWorkers(2))
	require.Eventually(t, func() bool { return len(runs.ticks("s")) >= 3 }, 20*time.Second, 20*time.Millisecond)
	// Every tick from the child's first to this process's last has its
	// task (kept for a day), and this process ran the ones after the kill.
	last := schedule(t, &q.Client, "s").LastTick
	runs.mu.Lock()
	defer runs.mu.Unlock()
	for at := first; !at.After(last); at = at.Add(time.Second) {
		_, err := q.Inspect(ctx, tickID("s", at))
		assert.NoError(t, err, "tick %v", at)
		if at.After(killed) {
			assert.Equal(t, 1, runs.first[tickID("s", at)], "tick %v after the kill did not run here once", at)
		}
	}
}

// A tick is skipped while the schedule's previous task is unfinished,
// and recorded so; the next tick after it finishes is enqueued.
func TestNoOverlapSkipsTicksWhileThePreviousTaskIsUnfinished(t *testing.T) {
	t.Parallel()
	q := open(t, redistest.Name(t))
	ctx := testCtx(t, 30*time.Second)
	started := make(chan string, 100)
	release, free := gate(t)
	serve(t, q, func(ctx context.Context, task *Task) ([]byte, error) {
		started <- task.ID
		select {
		case <-release:
		case <-ctx.Done():
		}
		return nil, nil
	}, WithWorkers(4))
	require.NoError(t, q.SetSchedule(ctx, "slow", "@every 1s", nil, WithNoOverlap()))
	var first string
	select {
	case first = <-started:
	case <-ctx.Done():
		t.Fatal("no tick")
	}
	_, firstTick, _ := TickOf(first)
	require.Eventually(t, func() bool {
		s := schedule(t, &q.Client, "slow")
		return s.LastResult == TickOverlap && s.LastTick.Sub(firstTick) >= 2*time.Second
	}, 20*time.Second, 20*time.Millisecond, "no tick was skipped")
	s := schedule(t, &q.Client, "slow")
	assert.Equal(t, first, s.LastTaskID)
	assert.Empty(t, started, "a tick ran while the previous one was unfinished")
	free()
	select {
	case next := <-started:
		_, at, ok := TickOf(next)
		require.True(t, ok)
		assert.True(t, at.After(s.LastTick), "tick %v ran after %v was skipped", at, s.LastTick)
	case <-ctx.Done():
		t.Fatal("no tick after the previous task finished")
	}
}

// Ticks missed while no process served are skipped, or the catch-up most
// recent of them run once a process serves.
func TestMissedTicksAreSkippedOrCaughtUpToTheBound(t *testing.T) {
	t.Parallel()
	q := open(t, redistest.Name(t))
	ctx := testCtx(t, 60*time.Second)
	require.NoError(t, q.SetSchedule(ctx, "skip", "@every 1s", nil))
	require.NoError(t, q.SetSchedule(ctx, "catch", "@every 1s", nil, WithCatchUp(3)))
	created := schedule(t, &q.Client, "catch").Created
	// Nobody serves for 9.5s: ticks 1 to 9 come, 1 to 4 are missed.
	require.Eventually(t, func() bool { return redisNow(t, q.rdb).Sub(created) > 9500*time.Millisecond },
		20*time.Second, 50*time.Millisecond)
	runs := newTickRuns()
	t0 := redisNow(t, q.rdb)
	serve(t, q, runs.handle, WithWorkers(4))
	require.Eventually(t, func() bool { return len(runs.ticks("skip")) > 0 && len(runs.ticks("catch")) > 0 },
		20*time.Second, 10*time.Millisecond)
	t1 := redisNow(t, q.rdb)
	require.Eventually(t, func() bool {
		return len(runs.ticks("skip")) >= 6 && len(runs.ticks("catch")) >= 9
	}, 20*time.Second, 10*time.Millisecond)
	older := func(ticks []time.Time, than time.Time) int {
		n := 0
		for _, at := range ticks {
			if at.Before(than.Add(-tickGrace)) {
				n++
			}
		}
		return n
	}
	skip, catch := runs.checkOnceInOrder(t, "skip", time.Second), runs.checkOnceInOrder(t, "catch", time.Second)
	assert.Zero(t, older(skip, t0), "a missed tick ran without catch-up: %v", skip)
	assert.LessOrEqual(t, older(skip, t1), 1, "a missed tick ran without catch-up: %v", skip)
	assert.LessOrEqual(t, older(catch, t0), 3, "more missed ticks than the catch-up ran: %v", catch)
	assert.GreaterOrEqual(t, older(catch, t1), 3, "fewer missed ticks than the catch-up ran: %v", catch)
}

// A schedule's hash as the tests read it.
func schedFields(t *testing.T, q *Queue, name string) map[string]string {
	t.Helper()
	f, err := q.rdb.HGetAll(context.Background(), q.lay.schedule(name)).Result()
	require.NoError(t, err)
	return f
}

func ticksNow(t *testing.T, q *Queue, name, version string, ticks ...time.Time) []any {
	t.Helper()
	args := q.lay.commonArgs(q.proc, q.lay.schedulePrefix, tickGrace.Milliseconds(), name, version, len(ticks))
	for _, at := range ticks {
		args = append(args, at.UnixMilli(), tickID(name, at))
	}
	res, err := tickScript.Run(context.Background(), q.rdb, q.lay.common(), args...).Result()
	require.NoError(t, err)
	return res.([]any)[1:]
}

func unfinishedCount(t *testing.T, q *Queue) int64 {
	t.Helper()
	n, err := q.rdb.Get(context.Background(), q.lay.count).Int64()
	if err == redis.Nil {
		return 0
	}
	require.NoError(t, err)
	return n
}

// The tick script, called as a scheduler would: each tick once (a second
// call of the same ticks, or of older ones, enqueues nothing), never a
// tick not due yet by Redis's clock, the catch-up bound, and nothing of
// a replaced definition.
func TestTickScriptEnqueuesEachTickOnce(t *testing.T) {
	t.Parallel()
	q := open(t, redistest.Name(t)) // not serving: no scheduler but the test
	ctx := testCtx(t, 10*time.Second)
	require.NoError(t, q.SetSchedule(ctx, "s", "@every 1s", []byte("v1"), WithCatchUp(3), oneMs))
	v1 := schedFields(t, q, "s")[schedVersion]
	now := redisNow(t, q.rdb)
	require.NoError(t, q.rdb.HSet(ctx, q.lay.schedule("s"), schedLast, now.Add(-time.Minute).UnixMilli()).Err())
	// Ticks 10.5s to 0.5s ago: 10.5 to 5.5 are missed (3 of them caught
	// up), 4.5 to 0.5 on time.
	var ticks []time.Time
	for k := 10; k >= 0; k-- {
		ticks = append(ticks, now.Add(-time.Duration(k)*time.Second-500*time.Millisecond))
	}
	future := now.Add(3 * time.Second)
	res := ticksNow(t, q, "s", v1, append(ticks, future)...)
	assert.Equal(t, []any{[]any{ticks[10].UnixMilli(), "queued"}}, res)
	assert.EqualValues(t, 3+5, unfinishedCount(t, q), "3 caught up and 5 on time")
	for i, at := range ticks {
		_, err := q.Inspect(ctx, tickID("s", at))
		if i < 3 {
			assert.ErrorIs(t, err, ErrTaskNotFound, "missed tick %d beyond the catch-up", i)
		} else {
			assert.NoError(t, err, "tick %d", i)
		}
	}
	// Their tasks gone (run, and their retention over), no tick comes again.
	_, err := q.rdb.Del(ctx, q.lay.count).Result()
	require.NoError(t, err)
	for _, at := range ticks {
		require.NoError(t, q.rdb.Del(ctx, q.lay.task(tickID("s", at))).Err())
	}
	res = ticksNow(t, q, "s", v1, ticks...)
	assert.Equal(t, []any{[]any{ticks[10].UnixMilli(), ""}}, res)
	assert.Zero(t, unfinishedCount(t, q), "a tick was enqueued twice")

	// Replaced: a tick computed from the old version is refused.
	require.NoError(t, q.SetSchedule(ctx, "s", "@every 1s", []byte("v2"), oneMs))
	f := schedFields(t, q, "s")
	require.NotEqual(t, v1, f[schedVersion])
	res = ticksNow(t, q, "s", v1, redisNow(t, q.rdb).Add(-time.Millisecond))
	assert.Equal(t, []any{"GONE"}, res)
	assert.Zero(t, unfinishedCount(t, q), "a tick of a replaced definition was enqueued")
	assert.Equal(t, f, schedFields(t, q, "s"), "a refused tick wrote")
	// Set again as it is: nothing changes.
	require.NoError(t, q.SetSchedule(ctx, "s", "@every 1s", []byte("v2"), oneMs))
	assert.Equal(t, f, schedFields(t, q, "s"), "setting a schedule to what it is changed it")
}

// A schedule replaced while processes serve: no tick of the old
// definition runs after the replacement.
func TestAReplacedScheduleRunsNoTickOfItsOldDefinition(t *testing.T) {
	t.Parallel()
	name := redistest.Name(t)
	ctx := testCtx(t, 30*time.Second)
	runs := newTickRuns()
	q1, q2 := open(t, name), open(t, name)
	serve(t, q1, runs.handle)
	serve(t, q2, runs.handle)
	require.NoError(t, q1.SetSchedule(ctx, "s", "@every 1s", []byte("old")))
	require.Eventually(t, func() bool { return len(runs.ticks("s")) >= 2 }, 20*time.Second, 10*time.Millisecond)
	require.NoError(t, q2.SetSchedule(ctx, "s", "@every 1s", []byte("new")))
	replaced := schedule(t, &q1.Client, "s").Created
	require.Eventually(t, func() bool {
		ticks := runs.ticks("s")
		return len(ticks) > 0 && ticks[len(ticks)-1].Sub(replaced) > 2*time.Second
	}, 20*time.Second, 10*time.Millisecond)
	runs.mu.Lock()
	defer runs.mu.Unlock()
	for id, p := range runs.payloads {
		_, at, _ := TickOf(id)
		assert.Equal(t, p == "new", at.After(replaced), "tick %v with payload %q, replaced at %v", at, p, replaced)
	}
}

func TestBadSchedulesAreRefusedAndWriteNothing(t *testing.T) {
	t.Parallel()
	name := redistest.Name(t)
	c, err := NewClient(srv.Client(), name)
	require.NoError(t, err)
	ctx := testCtx(t, 10*time.Second)
	long := strings.Repeat("x", MaxScheduleNameSize+1)
	for _, tc := range []struct {
		desc, name, spec string
		payload          []byte
		opts             []ScheduleOption
		want             error
	}{
		{"empty name", "", "@hourly", nil, nil, ErrInvalidOption},
		{"long name", long, "@hourly", nil, nil, ErrInvalidOption},
		{"bad cron", "s", "61 * * * *", nil, nil, ErrInvalidOption},
		{"short interval", "s", "@every 10ms", nil, nil, ErrInvalidOption},
		{"unknown zone", "s", "@hourly", nil, []ScheduleOption{WithTimeZone("Nowhere/Else")}, ErrInvalidOption},
		{"empty zone", "s", "@hourly", nil, []ScheduleOption{WithTimeZone("")}, ErrInvalidOption},
		{"zone of an interval", "s", "@every 1m", nil, []ScheduleOption{WithTimeZone("UTC")}, ErrInvalidOption},
		{"nil option", "s", "@hourly", nil, []ScheduleOption{nil}, ErrInvalidOption},
		{"negative catch-up", "s", "@hourly", nil, []ScheduleOption{WithCatchUp(-1)}, ErrInvalidOption},
		{"huge catch-up", "s", "@hourly", nil, []ScheduleOption{WithCatchUp(MaxCatchUp + 1)}, ErrInvalidOption},
		{"priority", "s", "@hourly", nil, []ScheduleOption{WithTaskOptions(WithPriority(MaxPriority + 1))}, ErrInvalidOption},
		{"task id", "s", "@hourly", nil, []ScheduleOption{WithTaskOptions(WithTaskID("x"))}, ErrInvalidOption},
		{"delay", "s", "@hourly", nil, []ScheduleOption{WithTaskOptions(WithDelay(time.Second))}, ErrInvalidOption},
		{"due at", "s", "@hourly", nil, []ScheduleOption{WithTaskOptions(WithDueAt(time.Now()))}, ErrInvalidOption},
		{"dedup", "s", "@hourly", nil, []ScheduleOption{WithTaskOptions(WithDedup("k", time.Second))}, ErrInvalidOption},
		{"nil task option", "s", "@hourly", nil, []ScheduleOption{WithTaskOptions(nil)}, ErrInvalidOption},
		{"payload", "s", "@hourly", make([]byte, DefaultMaxPayloadSize+1), nil, ErrPayloadTooLarge},
		{"unknown tenant", "s", "@hourly", nil, []ScheduleOption{WithTaskOptions(WithTenant("nobody"))}, ErrUnknownTenant},
	} {
		assert.ErrorIs(t, c.SetSchedule(ctx, tc.name, tc.spec, tc.payload, tc.opts...), tc.want, tc.desc)
		if tc.want != ErrUnknownTenant { // only SetSchedule, with Redis, knows the tenants
			assert.ErrorIs(t, CheckSchedule(tc.name, tc.spec, tc.payload, tc.opts...), tc.want, "CheckSchedule: %s", tc.desc)
		}
	}
	assert.NoError(t, CheckSchedule("s", "*/10 * * * * *", nil, WithTimeZone("Europe/Paris"), WithNoOverlap()))
	assert.ErrorIs(t, c.RemoveSchedule(ctx, "s"), ErrScheduleNotFound)
	assert.ErrorIs(t, c.RemoveSchedule(ctx, ""), ErrInvalidOption)
	_, err = c.RunSchedule(ctx, "s")
	assert.ErrorIs(t, err, ErrScheduleNotFound)
	_, err = c.RunSchedule(ctx, long)
	assert.ErrorIs(t, err, ErrInvalidOption)
	assert.Empty(t, redistest.Keys(t, srv.Client(), "*"+name+"*"), "a refused call wrote")
}

// RunSchedule enqueues a task at once, outside the ticks; Schedules
// shows it; a removed schedule is gone with its keys.
func TestRunScheduleAndRemoveSchedule(t *testing.T) {
	t.Parallel()
	q := open(t, redistest.Name(t))
	ctx := testCtx(t, 10*time.Second)
	require.NoError(t, q.SetTenant(ctx, "acme", 1))
	require.NoError(t, q.SetSchedule(ctx, "hourly", "@hourly", []byte("p"), WithTimeZone("Europe/Paris"),
		WithTaskOptions(WithTenant("acme"), WithPriority(3), WithMaxAttempts(2), WithTimeout(time.Second))))
	s := schedule(t, &q.Client, "hourly")
	assert.Equal(t, "@hourly", s.Spec)
	assert.Equal(t, "Europe/Paris", s.TimeZone)
	assert.Equal(t, []byte("p"), s.Payload)
	assert.Equal(t, "acme", s.Tenant)
	assert.Equal(t, 3, s.Priority)
	assert.Equal(t, 2, s.MaxAttempts)
	assert.Equal(t, time.Second, s.Timeout)
	assert.Equal(t, DefaultRetention, s.Retention)
	assert.True(t, s.LastTick.IsZero())
	assert.Equal(t, s.Created.Truncate(time.Hour).Add(time.Hour), s.Next)

	id, err := q.RunSchedule(ctx, "hourly")
	require.NoError(t, err)
	assert.True(t, strings.HasPrefix(id, "hourly@now-"), id)
	info, err := q.Inspect(ctx, id)
	require.NoError(t, err)
	assert.Equal(t, StateWaiting, info.State)
	assert.Equal(t, "acme", info.Tenant)
	assert.Equal(t, 3, info.Priority)
	s = schedule(t, &q.Client, "hourly")
	assert.Equal(t, id, s.LastTaskID)
	assert.False(t, s.LastRun.IsZero())
	assert.True(t, s.LastTick.IsZero(), "a run now is no tick")

	require.NoError(t, q.RemoveSchedule(ctx, "hourly"))
	assert.ErrorIs(t, q.RemoveSchedule(ctx, "hourly"), ErrScheduleNotFound)
	all, err := q.Schedules(ctx)
	require.NoError(t, err)
	assert.Empty(t, all)
	assert.Empty(t, redistest.Keys(t, q.rdb, q.lay.schedulePrefix+"*"))
	assert.Empty(t, redistest.Keys(t, q.rdb, q.lay.schedules))
}
