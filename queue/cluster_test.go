package queue

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/shepherd-go/shepherd/internal/redistest"
)

// A queue of one shard works on a Redis Cluster client: submit and serve
// from two handles, a tenant's task, a delayed task, a dead letter and its
// replay, a batch, a schedule, pause, Stats, Inspect and History; Acquire,
// a rate, deduplication, Cancel, WaitBatch, PurgeDead and Drain; and
// every key of the queue in one slot, on one master.
func TestQueueOnRedisCluster(t *testing.T) {
	t.Parallel()
	c := redistest.StartCluster(t, 3)
	ctx := testCtx(t, 30*time.Second)
	name := redistest.Name(t)
	openOn := func() *Queue {
		q, err := Open(ctx, c.NewClient(0), name)
		require.NoError(t, err)
		t.Cleanup(func() { assert.NoError(t, closeWithin(q)) })
		return q
	}
	server, submitter := openOn(), openOn()
	var failed atomic.Int64
	served := serve(t, server, func(ctx context.Context, task *Task) ([]byte, error) {
		if string(task.Payload) == "fail" {
			failed.Add(1)
			return nil, Permanent(errors.New("refused"))
		}
		return echo(ctx, task)
	}, WithWorkers(2))

	require.NoError(t, submitter.SetTenant(ctx, "acme", 2))
	var futures []*Future
	for i := range 20 {
		f, err := submitter.Submit(ctx, []byte(fmt.Sprint("p", i)))
		require.NoError(t, err)
		futures = append(futures, f)
	}
	tenant, err := submitter.Submit(ctx, []byte("t"), WithTenant("acme"))
	require.NoError(t, err)
	delayed, err := submitter.Submit(ctx, []byte("d"), WithDelay(200*time.Millisecond))
	require.NoError(t, err)
	info, err := submitter.Inspect(ctx, delayed.ID())
	require.NoError(t, err)
	if info.State != StateActive && info.State != StateDone { // a slow machine may be past the due time
		assert.Equal(t, StateDelayed, info.State)
	}
	dead, err := submitter.Submit(ctx, []byte("fail"))
	require.NoError(t, err)

	for i, f := range futures {
		res, err := wait(t, f, 10*time.Second)
		require.NoError(t, err)
		assert.Equal(t, fmt.Sprintf("p%d#1", i), string(res))
	}
	res, err := wait(t, tenant, 10*time.Second)
	require.NoError(t, err)
	assert.Equal(t, "t#1", string(res))
	res, err = wait(t, delayed, 10*time.Second)
	require.NoError(t, err)
	assert.Equal(t, "d#1", string(res))
	_, err = wait(t, dead, 10*time.Second)
	require.Error(t, err)

	info, err = submitter.Inspect(ctx, tenant.ID())
	require.NoError(t, err)
	assert.Equal(t, StateDone, info.State)
	assert.Equal(t, "acme", info.Tenant)
	info, err = submitter.Inspect(ctx, dead.ID())
	require.NoError(t, err)
	assert.Equal(t, StateDead, info.State)
	assert.Equal(t, "fail", string(info.Payload))
	letters, err := submitter.DeadLetters(ctx, 0, 10)
	require.NoError(t, err)
	require.Len(t, letters, 1)
	assert.Equal(t, dead.ID(), letters[0].ID)

	st, err := submitter.Stats(ctx)
	require.NoError(t, err)
	assert.EqualValues(t, 1, st.Dead)
	assert.Zero(t, st.Available+st.Delayed+st.Retrying+st.InFlight)
	assert.Len(t, st.Processes, 2)
	assert.EqualValues(t, 2, st.Workers)
	require.Len(t, st.Tenants, 1)
	assert.Equal(t, "acme", st.Tenants[0].ID)

	// Replay runs the dead letter again (and it dies again).
	require.EqualValues(t, 1, failed.Load())
	require.NoError(t, submitter.Replay(ctx, dead.ID()))
	require.Eventually(t, func() bool {
		info, err := submitter.Inspect(ctx, dead.ID())
		return failed.Load() == 2 && err == nil && info.State == StateDead && len(info.Errors) == 1
	}, 10*time.Second, 10*time.Millisecond, "the replayed dead letter did not die again")

	// A batch, waited for as one.
	batch := submitter.NewBatch(CollectAll)
	for i := range 5 {
		_, err := batch.Submit(ctx, []byte(fmt.Sprint("b", i)))
		require.NoError(t, err)
	}
	require.NoError(t, batch.Wait(ctx))

	// A schedule run now; a paused queue starts nothing until resumed.
	require.NoError(t, submitter.SetSchedule(ctx, "hourly", "@hourly", []byte("s")))
	require.NoError(t, submitter.Pause(ctx))
	id, err := submitter.RunSchedule(ctx, "hourly")
	require.NoError(t, err)
	st, err = submitter.Stats(ctx)
	require.NoError(t, err)
	assert.True(t, st.Paused)
	waiting, err := submitter.Tasks(ctx, StateWaiting, 0, 10)
	require.NoError(t, err)
	require.Len(t, waiting, 1, "the schedule's task waits while the queue is paused")
	assert.Equal(t, id, waiting[0].ID)
	require.NoError(t, submitter.Resume(ctx))
	require.Eventually(t, func() bool {
		res, err = submitter.Result(ctx, id)
		return !errors.Is(err, ErrNotFinished)
	}, 10*time.Second, 10*time.Millisecond, "the schedule's task did not finish after Resume")
	require.NoError(t, err)
	assert.Equal(t, "s#1", string(res))
	schedules, err := submitter.Schedules(ctx)
	require.NoError(t, err)
	require.Len(t, schedules, 1)

	// The history (flushed now, not at its next HistoryFine).
	server.flushHistory(ctx, true)
	points, err := submitter.History(ctx, HistoryCoarse, 2)
	require.NoError(t, err)
	var done, died int64
	for _, p := range points {
		done, died = done+p.Done, died+p.Dead
	}
	assert.EqualValues(t, 20+1+1+5+1, done, "history: 20 tasks, the tenant's, the delayed, the batch's 5 and the schedule's")
	assert.EqualValues(t, 2, died, "history: the dead letter, twice")

	// Capacity outside the queue, a rate, deduplication, cancellation, a
	// batch waited for by id, dead letters purged, the servers drained.
	slot, err := submitter.Acquire(ctx, "acme")
	require.NoError(t, err)
	require.NoError(t, slot.Release(ctx))
	require.NoError(t, submitter.SetRate(ctx, Rate{N: 1000, Per: time.Second}))
	first, err := submitter.Submit(ctx, []byte("x"), WithDedup("k", time.Minute))
	require.NoError(t, err)
	again, err := submitter.Submit(ctx, []byte("x"), WithDedup("k", time.Minute))
	require.NoError(t, err)
	assert.Equal(t, first.ID(), again.ID(), "deduplicated")
	later, err := submitter.Submit(ctx, []byte("later"), WithDelay(time.Hour))
	require.NoError(t, err)
	require.NoError(t, submitter.Cancel(ctx, later.ID()))
	_, err = wait(t, later, 10*time.Second)
	assert.ErrorIs(t, err, ErrCancelled)
	batch = submitter.NewBatch(FailFast)
	_, err = batch.Submit(ctx, []byte("b"))
	require.NoError(t, err)
	require.NoError(t, submitter.WaitBatch(ctx, batch.ID()))
	purged, err := submitter.PurgeDead(ctx)
	require.NoError(t, err)
	assert.Equal(t, 1, purged)
	asked, err := submitter.Drain(ctx)
	require.NoError(t, err)
	assert.Equal(t, 1, asked)
	select {
	case <-served.Done():
	case <-ctx.Done():
		t.Fatal("the drained server did not stop")
	}

	// Every key of the queue is on one master, in one slot.
	var holders []int
	var slots = map[int64]bool{}
	for i := range c.Masters() {
		var n int
		iter := c.Node(i).Scan(ctx, 0, "*"+name+"*", 1000).Iterator()
		for iter.Next(ctx) {
			key := iter.Val()
			assert.True(t, strings.HasPrefix(key, "shepherd:{"+name+"}:queue:"), key)
			slot, err := c.Node(i).ClusterKeySlot(ctx, key).Result()
			require.NoError(t, err)
			slots[slot] = true
			n++
		}
		require.NoError(t, iter.Err())
		if n > 0 {
			holders = append(holders, i)
		}
	}
	assert.Len(t, holders, 1, "the queue's keys are on masters %v", holders)
	assert.Len(t, slots, 1, "the queue's keys are in slots %v", slots)
}
