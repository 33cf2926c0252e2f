package queue

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/shepherd-go/shepherd/internal/redistest"
)

// Tests of the read side of a sharded queue (shard_read.go): every reader
// adds up or merges the shards, and every call by id finds its task in
// whichever shard holds it.

// idAwayFrom returns a caller's task id, starting with prefix, whose own
// shard (shardOfKey) is not shard: a tenant's task of that id is in its
// tenant's shard, so finding it takes a search.
func idAwayFrom(t *testing.T, prefix string, shard, n int) string {
	t.Helper()
	for i := range 1000 {
		id := fmt.Sprintf("%s-%d", prefix, i)
		if shardOfKey(id, n) != shard {
			return id
		}
	}
	t.Fatal("no id away from the shard")
	return ""
}

// A Client (which reads the shard count from Redis) sees the sum of
// every shard: depths, tenants, the untenanted capacity; one process,
// not one per shard; and the rate as set, not a shard's part of it.
func TestShardedStatsAddUpEveryShard(t *testing.T) {
	t.Parallel()
	ctx := testCtx(t, 20*time.Second)
	name := redistest.Name(t)
	q := open(t, name, WithShards(3))
	c, err := NewClient(srv.Client(), name)
	require.NoError(t, err)
	tenants := tenantsByShard(t, 3)
	for i, ten := range tenants {
		require.NoError(t, c.SetTenant(ctx, ten, 1+i))
	}
	for i, ten := range tenants {
		for range i + 1 { // 1, 2 and 3 waiting tasks
			_, err := q.Submit(ctx, nil, WithTenant(ten))
			require.NoError(t, err)
		}
		_, err := q.Submit(ctx, nil, WithTenant(ten), WithDelay(time.Hour))
		require.NoError(t, err)
		_, err = q.Submit(ctx, nil, WithTenant(ten), WithPriority(2))
		require.NoError(t, err)
	}
	perShard := map[int]bool{}
	for range 6 { // untenanted, round the shards
		f, err := q.Submit(ctx, nil)
		require.NoError(t, err)
		perShard[carriedShard(f.ID(), 3)] = true
	}
	require.Len(t, perShard, 3, "the untenanted tasks are in every shard")
	require.NoError(t, c.SetUntenantedCapacity(ctx, 7))
	require.NoError(t, c.SetRate(ctx, Rate{N: 300, Per: time.Second}))

	st, err := c.Stats(ctx)
	require.NoError(t, err)
	assert.EqualValues(t, 1+2+3+3+6, st.Available, "waiting tasks of every shard, priorities included")
	assert.EqualValues(t, 3, st.Delayed)
	require.Len(t, st.Processes, 1, "a process keeps alive in every shard but is one process")
	assert.Equal(t, q.Process(), st.Processes[0].ID)
	assert.Equal(t, 300, st.Rate.N, "the rate as set, not a shard's part")
	assert.Equal(t, time.Second, st.Rate.Per)
	require.Len(t, st.Tenants, 3)
	for i, ten := range tenants {
		var ti TenantInfo
		for _, x := range st.Tenants {
			if x.ID == ten {
				ti = x
			}
		}
		require.Equal(t, ten, ti.ID, "tenant %s listed", ten)
		assert.EqualValues(t, i+1, ti.Capacity)
		assert.EqualValues(t, i+2, ti.Waiting, "tenant %s", ti.ID)
		assert.EqualValues(t, i+3, ti.Unfinished, "tenant %s", ti.ID)
	}
	assert.True(t, sort.SliceIsSorted(st.Tenants, func(i, j int) bool { return st.Tenants[i].ID < st.Tenants[j].ID }))
	listed, err := c.Tenants(ctx)
	require.NoError(t, err)
	assert.Equal(t, st.Tenants, listed)
	capacity, load, err := c.Untenanted(ctx)
	require.NoError(t, err)
	assert.EqualValues(t, 7, capacity, "the shards' shares add up")
	assert.Zero(t, load)
}

// Tasks merges the shards' lists, each in its own order, and pages
// through them without losing or repeating a task.
func TestShardedTasksMergeEveryShard(t *testing.T) {
	t.Parallel()
	ctx := testCtx(t, 20*time.Second)
	q, c, tenants := openSharded(t, ctx, 1)
	// Delayed tasks, due in the order submitted, round the shards.
	var delayed []string
	for i := range 9 {
		f, err := q.Submit(ctx, nil, WithTenant(tenants[i%3]), WithDueAt(time.Now().Add(time.Hour+time.Duration(i)*time.Second)))
		require.NoError(t, err)
		delayed = append(delayed, f.ID())
	}
	// Waiting ones: untenanted (shard by shard), then each tenant's.
	var untenanted []string
	for range 3 {
		f, err := q.Submit(ctx, nil)
		require.NoError(t, err)
		untenanted = append(untenanted, f.ID())
	}
	sort.SliceStable(untenanted, func(i, j int) bool {
		return carriedShard(untenanted[i], 3) < carriedShard(untenanted[j], 3)
	})
	byTenant := map[string][]string{}
	for _, ten := range tenants {
		for range 2 {
			f, err := q.Submit(ctx, nil, WithTenant(ten))
			require.NoError(t, err)
			byTenant[ten] = append(byTenant[ten], f.ID())
		}
	}
	waiting := append([]string(nil), untenanted...)
	sorted := append([]string(nil), tenants...)
	sort.Strings(sorted)
	for _, ten := range sorted {
		waiting = append(waiting, byTenant[ten]...)
	}

	pages := func(state State, size int) []string {
		t.Helper()
		var ids []string
		for offset := 0; ; offset += size {
			page, err := c.Tasks(ctx, state, offset, size)
			require.NoError(t, err)
			for _, ti := range page {
				assert.Equal(t, state, ti.State)
				ids = append(ids, ti.ID)
			}
			if len(page) < size {
				return ids
			}
		}
	}
	assert.Equal(t, delayed, pages(StateDelayed, 100), "soonest due first, across the shards")
	assert.Equal(t, delayed, pages(StateDelayed, 2))
	assert.Equal(t, waiting, pages(StateWaiting, 100))
	assert.Equal(t, waiting, pages(StateWaiting, 4))
}

// Dead letters of every shard are listed newest first, and a dead letter
// of any shard is inspected, replayed and deleted by id (a caller's id
// too, found in its tenant's shard); PurgeDead empties every shard.
func TestShardedDeadLetters(t *testing.T) {
	t.Parallel()
	ctx := testCtx(t, 30*time.Second)
	q, c, tenants := openSharded(t, ctx, 1)
	serve(t, q, func(context.Context, *Task) ([]byte, error) {
		return nil, Permanent(errors.New("no"))
	}, WithWorkers(2))
	// Six letters, one after the other, round the shards; the caller's
	// ids are not in their own shard.
	var died []string // oldest first
	for i := range 6 {
		ten := tenants[i%3]
		id := idAwayFrom(t, fmt.Sprintf("dl%d", i), shardOfKey(ten, 3), 3)
		f, err := q.Submit(ctx, []byte("die"), WithTenant(ten), WithTaskID(id))
		require.NoError(t, err)
		_, err = wait(t, f, 10*time.Second)
		require.ErrorIs(t, err, ErrFailed)
		assert.Equal(t, []int{shardOfKey(ten, 3)}, shardHolding(t, q, id))
		died = append(died, id)
		time.Sleep(2 * time.Millisecond) // distinct times of death: the shards merge by them
	}
	newest := make([]string, len(died))
	for i, id := range died {
		newest[len(died)-1-i] = id
	}
	list, err := c.DeadLetters(ctx, 0, 10)
	require.NoError(t, err)
	assert.Equal(t, newest, ids(list))
	list, err = c.DeadLetters(ctx, 2, 3)
	require.NoError(t, err)
	assert.Equal(t, newest[2:5], ids(list))
	list, err = c.Tasks(ctx, StateDead, 1, 2)
	require.NoError(t, err)
	assert.Equal(t, newest[1:3], ids(list))
	st, err := c.Stats(ctx)
	require.NoError(t, err)
	assert.EqualValues(t, 6, st.Dead)

	for _, id := range died {
		info, err := c.Inspect(ctx, id)
		require.NoError(t, err, id)
		assert.Equal(t, StateDead, info.State)
		_, err = c.Result(ctx, id)
		require.ErrorIs(t, err, ErrFailed, id)
	}
	_, err = c.Inspect(ctx, "nowhere")
	require.ErrorIs(t, err, ErrTaskNotFound)
	_, err = c.Result(ctx, "nowhere")
	require.ErrorIs(t, err, ErrTaskNotFound)

	// Replayed, it runs again, and dies again, in its own shard.
	before, err := c.Inspect(ctx, died[4])
	require.NoError(t, err)
	require.NoError(t, c.Replay(ctx, died[4]))
	require.Eventually(t, func() bool {
		info, err := c.Inspect(ctx, died[4])
		return err == nil && info.State == StateDead && info.Submitted.After(before.Submitted)
	}, 10*time.Second, 10*time.Millisecond)
	assert.Equal(t, []int{shardOfKey(tenants[1], 3)}, shardHolding(t, q, died[4]), "replayed in its shard")
	require.ErrorIs(t, c.Replay(ctx, "nowhere"), ErrTaskNotFound)

	require.NoError(t, c.DeleteDead(ctx, died[2]))
	_, err = c.Inspect(ctx, died[2])
	require.ErrorIs(t, err, ErrTaskNotFound)
	require.ErrorIs(t, c.DeleteDead(ctx, died[2]), ErrTaskNotFound)

	n, err := c.PurgeDead(ctx)
	require.NoError(t, err)
	assert.Equal(t, 5, n, "every shard's letters")
	st, err = c.Stats(ctx)
	require.NoError(t, err)
	assert.Zero(t, st.Dead)
}

func ids(ts []TaskInfo) []string {
	out := make([]string, len(ts))
	for i, t := range ts {
		out[i] = t.ID
	}
	return out
}

// The history's buckets of every shard add up.
func TestShardedHistoryAddsUpEveryShard(t *testing.T) {
	t.Parallel()
	ctx := testCtx(t, 10*time.Second)
	name := redistest.Name(t)
	q := open(t, name, WithShards(3))
	for i, l := range q.known() {
		args := l.commonArgs(int64(HistoryFine/time.Second), HistoryFineSpan.Milliseconds(),
			int64(HistoryCoarse/time.Second), HistoryCoarseSpan.Milliseconds(), "done", i+1, "h10", 1)
		_, err := historyScript.Run(ctx, srv.Client(), l.common(), args...).Result()
		require.NoError(t, err)
	}
	c, err := NewClient(srv.Client(), name)
	require.NoError(t, err)
	h, err := c.History(ctx, HistoryCoarse, 2) // the minute may turn between the writes
	require.NoError(t, err)
	assert.EqualValues(t, 1+2+3, h[0].Done+h[1].Done)
	for _, p := range h {
		if p.Done > 0 {
			assert.Equal(t, binTop(10), p.HandlerP50, "the bins add up")
		}
	}
}

// On a Redis Cluster, where a sharded queue's shards are slots of their
// own (on different masters), every reader and call by id works: no
// pipeline or script of theirs mixes shards where Cluster refuses it.
func TestShardedReadsOnRedisCluster(t *testing.T) {
	t.Parallel()
	c := redistest.StartCluster(t, 3)
	ctx := testCtx(t, 60*time.Second)
	name := "" // one whose three shards are on three masters
	for i := 0; name == ""; i++ {
		try := fmt.Sprint(redistest.Name(t), "-", i)
		nodes := map[int]bool{}
		for s := range 3 {
			n, err := c.NodeOf(ctx, "shepherd:{"+shardName(try, s)+"}:queue:settings")
			require.NoError(t, err)
			nodes[n] = true
		}
		if len(nodes) == 3 {
			name = try
		}
	}
	q, err := Open(ctx, c.NewClient(0), name, WithShards(3))
	require.NoError(t, err)
	t.Cleanup(func() { assert.NoError(t, closeWithin(q)) })
	cl, err := NewClient(c.NewClient(0), name)
	require.NoError(t, err)
	tenants := registerTenantsByShard(t, ctx, cl, 3, 2)
	var waiting []*Future
	for i, ten := range tenants {
		f, err := q.Submit(ctx, []byte("wait"), WithTenant(ten), WithTaskID(idAwayFrom(t, fmt.Sprint("w", i), i, 3)))
		require.NoError(t, err)
		waiting = append(waiting, f)
		_, err = q.Submit(ctx, []byte("later"), WithTenant(ten), WithDelay(time.Hour))
		require.NoError(t, err)
	}
	st, err := cl.Stats(ctx)
	require.NoError(t, err)
	assert.EqualValues(t, 3, st.Available)
	assert.EqualValues(t, 3, st.Delayed)
	assert.Len(t, st.Tenants, 3)
	list, err := cl.Tasks(ctx, StateWaiting, 0, 10)
	require.NoError(t, err)
	assert.Len(t, list, 3)
	list, err = cl.Tasks(ctx, StateDelayed, 1, 10)
	require.NoError(t, err)
	assert.Len(t, list, 2)
	for _, f := range waiting {
		require.NoError(t, cl.Cancel(ctx, f.ID()))
		_, err := wait(t, f, 10*time.Second)
		require.ErrorIs(t, err, ErrCancelled)
	}
	list, err = cl.Tasks(ctx, StateCancelled, 0, 10)
	require.NoError(t, err)
	assert.Len(t, list, 3)

	serve(t, q, func(context.Context, *Task) ([]byte, error) { return nil, Permanent(errors.New("no")) }, WithWorkers(2))
	var dead []string
	for i, ten := range tenants {
		f, err := q.Submit(ctx, []byte("die"), WithTenant(ten), WithTaskID(idAwayFrom(t, fmt.Sprint("d", i), i, 3)))
		require.NoError(t, err)
		_, err = wait(t, f, 10*time.Second)
		require.ErrorIs(t, err, ErrFailed)
		dead = append(dead, f.ID())
	}
	letters, err := cl.DeadLetters(ctx, 0, 10)
	require.NoError(t, err)
	assert.Len(t, letters, 3)
	for _, id := range dead {
		_, err := cl.Result(ctx, id)
		require.ErrorIs(t, err, ErrFailed)
	}
	require.NoError(t, cl.Replay(ctx, dead[2]))
	require.NoError(t, cl.DeleteDead(ctx, dead[1]))

	require.NoError(t, cl.SetSchedule(ctx, "every", "@every 1s", nil, WithTaskOptions(WithTenant(tenants[2]))))
	require.NoError(t, cl.SetSchedule(ctx, "every", "@every 1s", nil, WithTaskOptions(WithTenant(tenants[1]))))
	schedules, err := cl.Schedules(ctx)
	require.NoError(t, err)
	require.Len(t, schedules, 1)
	id, err := cl.RunSchedule(ctx, "every")
	require.NoError(t, err)
	assert.Equal(t, 1, carriedShard(id, 3))
	require.Eventually(t, func() bool {
		s, err := cl.Schedules(ctx)
		return err == nil && len(s) == 1 && s[0].LastResult == TickQueued
	}, 10*time.Second, 20*time.Millisecond, "the schedule did not tick")
	require.NoError(t, cl.RemoveSchedule(ctx, "every"))

	q.flushHistory(ctx, true)
	_, err = cl.History(ctx, HistoryFine, 3)
	require.NoError(t, err)
	_, _, err = cl.Untenanted(ctx)
	require.NoError(t, err)
	require.Eventually(t, func() bool {
		info, err := cl.Inspect(ctx, dead[2])
		return err == nil && info.State == StateDead && info.Attempt == 1
	}, 10*time.Second, 10*time.Millisecond)
	purged, err := cl.PurgeDead(ctx)
	require.NoError(t, err)
	assert.GreaterOrEqual(t, purged, 2) // the schedule's failed tasks may be dead letters too
}
