package queue

import (
	"context"
	"fmt"
	"sort"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// A schedule lives in the shard of its tasks (its tenant's, else its
// name's) and moves with its tenant; it is listed, run and removed from
// any process; its ticks' tasks carry the shard, and TickOf reads them.
func TestShardedSchedules(t *testing.T) {
	t.Parallel()
	ctx := testCtx(t, 30*time.Second)
	q, c, tenants := openSharded(t, ctx, 5)
	holding := func(sched string) []int {
		t.Helper()
		var in []int
		for _, l := range q.known() {
			ok, err := srv.Client().HExists(ctx, l.schedules, sched).Result()
			require.NoError(t, err)
			if ok {
				in = append(in, l.shard)
			}
		}
		return in
	}
	plain := "plain"
	require.NoError(t, c.SetSchedule(ctx, plain, "@yearly", nil))
	assert.Equal(t, []int{shardOfKey(plain, 3)}, holding(plain), "its name's shard")
	moved := "" // a name of shard 0: RunSchedule looks for it there first
	for i := 0; moved == ""; i++ {
		if name := fmt.Sprint("moved-", i); shardOfKey(name, 3) == 0 {
			moved = name
		}
	}
	require.NoError(t, c.SetSchedule(ctx, moved, "@yearly", nil, WithTaskOptions(WithTenant(tenants[2]))))
	assert.Equal(t, []int{2}, holding(moved), "its tenant's shard")
	require.NoError(t, c.SetSchedule(ctx, moved, "@yearly", nil, WithTaskOptions(WithTenant(tenants[1]))))
	assert.Equal(t, []int{1}, holding(moved), "it moves with its tenant")
	require.ErrorIs(t, c.SetSchedule(ctx, moved, "@yearly", nil, WithTaskOptions(WithTenant("unknown"))), ErrUnknownTenant)
	assert.Equal(t, []int{1}, holding(moved), "a refused set changes nothing")

	list, err := c.Schedules(ctx)
	require.NoError(t, err)
	var names []string
	for _, s := range list {
		names = append(names, s.Name)
	}
	want := []string{moved, plain}
	sort.Strings(want)
	assert.Equal(t, want, names)

	id, err := c.RunSchedule(ctx, moved)
	require.NoError(t, err)
	assert.Equal(t, 1, carriedShard(id, 3), "the id %s names the shard", id)
	info, err := c.Inspect(ctx, id)
	require.NoError(t, err)
	assert.Equal(t, tenants[1], info.Tenant)
	_, err = c.RunSchedule(ctx, "absent")
	require.ErrorIs(t, err, ErrScheduleNotFound)

	require.NoError(t, c.RemoveSchedule(ctx, moved))
	assert.Empty(t, holding(moved))
	require.ErrorIs(t, c.RemoveSchedule(ctx, moved), ErrScheduleNotFound)

	// Its ticks: a schedule of shard 2's tenant ticks in shard 2. A tick
	// runs until the test has looked where it is (done, with no outcome
	// kept, it would be in no shard).
	ticked := make(chan string, 10)
	release := make(chan struct{})
	serve(t, q, func(ctx context.Context, task *Task) ([]byte, error) {
		select {
		case ticked <- task.ID:
		default:
		}
		if _, _, ok := TickOf(task.ID); ok {
			select {
			case <-release:
			case <-ctx.Done():
			}
		}
		return nil, nil
	}, WithWorkers(1))
	var releaseOnce sync.Once
	t.Cleanup(func() { releaseOnce.Do(func() { close(release) }) }) // before the server stops
	require.NoError(t, c.SetSchedule(ctx, "every", "@every 1s", nil, WithTaskOptions(WithTenant(tenants[2]))))
	var tick string
	for tick == "" {
		select {
		case id := <-ticked:
			if _, _, ok := TickOf(id); ok {
				tick = id
			}
		case <-ctx.Done():
			t.Fatal("no tick ran")
		}
	}
	assert.Equal(t, 2, carriedShard(tick, 3), "tick %s", tick)
	sched, at, ok := TickOf(tick)
	require.True(t, ok)
	assert.Equal(t, "every", sched)
	assert.Equal(t, tick, "2~"+tickID("every", at))
	assert.Equal(t, []int{2}, shardHolding(t, q, tick))
	releaseOnce.Do(func() { close(release) })
}

// TickOf reads a sharded queue's tick ids, and a schedule's name may not
// start as they do.
func TestTickOfAShardedTick(t *testing.T) {
	t.Parallel()
	at := time.Date(2026, 1, 2, 3, 4, 5, 6_000_000, time.UTC)
	for _, id := range []string{tickID("a~b", at), "0~" + tickID("a~b", at), "17~" + tickID("a~b", at)} {
		name, tick, ok := TickOf(id)
		require.True(t, ok, id)
		assert.Equal(t, "a~b", name, id)
		assert.True(t, at.Equal(tick), id)
	}
	for _, name := range []string{"1~x", "0~", "255~y"} {
		require.ErrorIs(t, CheckSchedule(name, "@daily", nil), ErrInvalidOption, name)
	}
	for _, name := range []string{"x~1", "01~x", "256~x", "1000~x", "~x"} {
		require.NoError(t, CheckSchedule(name, "@daily", nil), name)
	}
}
