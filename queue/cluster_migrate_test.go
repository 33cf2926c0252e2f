package queue

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/shepherd-go/shepherd/internal/redistest"
	"github.com/shepherd-go/shepherd/internal/script"
)

// A shard's slot moves to a master added to the cluster while the queue
// runs (the way a cluster scales out: add a master, move slots to it):
// every acknowledged task still runs once and completes, Submits to the
// moving shard wait out the move instead of failing, and after it the new
// master runs the shard's scripts and sends its messages.
func TestShardMovesToAnAddedMasterUnderLoad(t *testing.T) {
	t.Parallel()
	c := redistest.StartCluster(t, 3)
	ctx := testCtx(t, 120*time.Second)
	name, _ := spreadQueueName(t, ctx, c)
	openOn := func(opts ...Option) *Queue {
		return openOnCluster(t, ctx, c, name, append([]Option{WithShards(3)}, opts...)...)
	}
	submitter, a, b := openOn(), openOn(), openOn()
	tenants := registerTenantsByShard(t, ctx, submitter, 3, 4)

	var mu sync.Mutex
	runs := map[string]int{}
	starts := map[string][]time.Time{} // by tenant
	handler := func(_ context.Context, t *Task) ([]byte, error) {
		mu.Lock()
		runs[t.ID]++
		if t.Tenant != "" {
			starts[t.Tenant] = append(starts[t.Tenant], time.Now())
		}
		mu.Unlock()
		time.Sleep(time.Millisecond)
		return t.Payload, nil
	}
	serve(t, a, handler, WithWorkers(4))
	serve(t, b, handler, WithWorkers(4))

	type sent struct {
		f       *Future
		payload string
	}
	var (
		smu      sync.Mutex
		all      []sent
		failures []error
	)
	submit := func(i int, opts ...SubmitOption) {
		p := fmt.Sprint("t", i)
		f, err := submitter.Submit(ctx, []byte(p), opts...)
		smu.Lock()
		defer smu.Unlock()
		if err != nil {
			failures = append(failures, err)
			return
		}
		all = append(all, sent{f, p})
	}
	// A backlog on shard 1, so that the slot holds keys to move.
	for i := range 2000 {
		submit(i, WithTenant(tenants[1]))
	}
	stop := make(chan struct{})
	var wg sync.WaitGroup
	var n atomic.Int64
	// Submitters of their own for each shard's tenant (a Submit to the
	// moving shard waits for the move), and for untenanted tasks.
	for g := range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				select {
				case <-stop:
					return
				default:
				}
				i := 100000*(g+1) + int(n.Add(1))
				if g < 3 {
					submit(i, WithTenant(tenants[g]))
				} else {
					submit(i)
				}
				time.Sleep(time.Millisecond)
			}
		}()
	}

	reader, err := NewClient(c.NewClient(0), name) // reads only, made before the move
	require.NoError(t, err)
	first, err := reader.Stats(ctx)
	require.NoError(t, err)
	before := first.PerShard[1].Master
	added, err := c.AddMaster(ctx)
	require.NoError(t, err)
	settings := "shepherd:{" + shardName(name, 1) + "}:queue:settings"
	slot, err := c.Node(0).ClusterKeySlot(ctx, settings).Result()
	require.NoError(t, err)
	began := time.Now()
	require.NoError(t, c.MoveSlot(ctx, int(slot), added, 10, 5*time.Millisecond))
	moved := time.Since(began)
	time.Sleep(500 * time.Millisecond)
	close(stop)
	wg.Wait()

	for _, s := range all {
		res, err := wait(t, s.f, 30*time.Second)
		require.NoError(t, err, "task %s", s.f.ID())
		assert.Equal(t, s.payload, string(res))
	}
	mu.Lock()
	for id, k := range runs {
		assert.Equal(t, 1, k, "task %s ran %d times", id, k)
	}
	mu.Unlock()
	// The longest wait between two starts of each shard's tenant's tasks
	// that overlaps the move: shard 1 waits for the move (and the feed's
	// backoff after it), the others do not.
	stall := make([]time.Duration, 3)
	for s, ten := range tenants {
		var last time.Time
		for _, at := range starts[ten] {
			if !last.IsZero() && at.After(began) && last.Before(began.Add(moved)) {
				stall[s] = max(stall[s], at.Sub(last))
			}
			last = at
		}
	}
	t.Logf("moved in %v; %d tasks, %d failed Submits; each shard's longest pause %v", moved, len(all), len(failures), stall)
	assert.Greater(t, stall[1], moved/2, "shard 1's tasks ran during its move")
	assert.Less(t, stall[1], moved+600*time.Millisecond, "shard 1's tasks waited long after its move")
	assert.Less(t, stall[0], time.Second, "shard 0 waited for shard 1's move")
	assert.Less(t, stall[2], time.Second, "shard 2 waited for shard 1's move")
	assert.Empty(t, failures, "Submits failed during the move")
	st, err := c.Node(added).Info(ctx, "commandstats").Result()
	require.NoError(t, err)
	assert.Contains(t, st, "cmdstat_evalsha", "the new master ran no script of shard 1")
	assert.True(t, strings.Contains(st, "cmdstat_spublish"), "the new master sent no message of shard 1")
	stats, err := submitter.Stats(ctx)
	require.NoError(t, err)
	assert.Zero(t, stats.Available+stats.Delayed+stats.Retrying+stats.InFlight+stats.Dead)
	// A reader's Stats names the new master.
	assert.NotEqual(t, c.Addrs()[added], before)
	assert.Eventually(t, func() bool {
		st, err := reader.Stats(ctx)
		return err == nil && st.PerShard[1].Master == c.Addrs()[added]
	}, 5*time.Second, 50*time.Millisecond, "Stats.PerShard names the old master")
	// Each process follows the shard's channels to the new master.
	wakes := submitter.known()[1].wakeChannel()
	assert.Eventually(t, func() bool {
		v, err := c.Node(added).Do(ctx, "PUBSUB", "SHARDNUMSUB", wakes).Slice()
		return err == nil && v[1] == int64(3)
	}, 10*time.Second, 20*time.Millisecond, "the processes did not subscribe on the new master")
}

// Redis moves a slot's keys in whatever order it lists them. A script
// whose declared keys are all still on the old master, but whose task
// key (named in its body, not declared) has moved, would run there up to
// its read of that key and stop with an error, its writes before it
// kept: a take that popped a task's id from ready would lose the task.
// Every call declares the slot guard too, a key nothing writes, so Redis
// refuses a call while its slot moves (TRYAGAIN) and none runs half. The
// test makes every key the take declares exist, as in a busy queue (a
// retry and a delayed task, dead letters over the limit, a parked
// tenant, a held slot, a withdrawn Submit, an idle process), moves the
// key of the next task to take, and takes.
func TestNoScriptRunsHalfWhileItsSlotMoves(t *testing.T) {
	t.Parallel()
	c := redistest.StartCluster(t, 3)
	ctx := testCtx(t, 60*time.Second)
	name := redistest.Name(t)
	q := openOnCluster(t, ctx, c, name, WithMaxDeadLetters(1))
	l := q.known()[0]
	take := func(n int) []any {
		t.Helper()
		res, err := script.Run(ctx, q.rdb, dequeueScript, "take", l.common(l.inflight(q.proc)), l.commonArgs(q.proc, n, promoteLimit)...)
		require.NoError(t, err)
		return res.([]any)
	}
	end := func(id, kind string, delay time.Duration) {
		t.Helper()
		_, err := script.Run(ctx, q.rdb, completeScript, "end", l.common(l.inflight(q.proc)),
			l.commonArgs(q.proc, 0, promoteLimit, id, 1, kind, "boom", delay.Milliseconds(), "")...)
		require.NoError(t, err)
	}
	submit := func(opts ...SubmitOption) *Future {
		t.Helper()
		f, err := q.Submit(ctx, []byte("x"), opts...)
		require.NoError(t, err)
		return f
	}

	take(1) // nothing to take: the process is idle
	var ids []string
	for range 3 {
		ids = append(ids, submit().ID())
	}
	require.Len(t, take(3), 2+3*takenFields)
	end(ids[0], "fail", time.Hour) // retrying in an hour
	end(ids[1], "perm", 0)         // dead
	end(ids[2], "perm", 0)         // dead, and one dead letter dropped
	require.NoError(t, q.SetTenant(ctx, "acme", 1))
	require.NoError(t, q.SetTenant(ctx, "beta", 1))
	submit(WithTenant("acme"))
	submit(WithTenant("acme"))
	require.Len(t, take(1), 2+takenFields) // acme at its capacity, running
	require.Len(t, take(1), 2)             // acme parked
	slot, err := q.Acquire(ctx, "beta")
	require.NoError(t, err)
	defer func() { _ = slot.Release(context.Background()) }()
	_, err = script.Run(ctx, q.rdb, withdrawScript, "withdraw", l.common(),
		l.commonArgs("gone", "gone", withdrawnTTL.Milliseconds(), "")...)
	require.NoError(t, err)
	submit(WithDelay(time.Hour))
	var backlog []*Future
	for range 10 {
		backlog = append(backlog, submit())
	}
	rdb := c.Client()
	for _, k := range l.common(l.inflight(q.proc)) {
		n, err := rdb.Exists(ctx, k).Result()
		require.NoError(t, err)
		require.EqualValues(t, 1, n, "key %s does not exist", k)
	}

	// The slot starts moving; the key of the next task to take moves first.
	from, err := c.NodeOf(ctx, l.settings)
	require.NoError(t, err)
	to := (from + 1) % 3
	hslot, err := rdb.ClusterKeySlot(ctx, l.settings).Result()
	require.NoError(t, err)
	id := func(i int) string { return c.Node(i).Do(ctx, "CLUSTER", "MYID").Val().(string) }
	require.NoError(t, c.Node(to).Do(ctx, "CLUSTER", "SETSLOT", hslot, "IMPORTING", id(from)).Err())
	require.NoError(t, c.Node(from).Do(ctx, "CLUSTER", "SETSLOT", hslot, "MIGRATING", id(to)).Err())
	next := backlog[0].ID()
	require.Equal(t, next, c.Node(from).LIndex(ctx, l.ready, -1).Val())
	host, port, _ := strings.Cut(c.Addrs()[to], ":")
	require.NoError(t, c.Node(from).Do(ctx, "MIGRATE", host, port, "", 0, 5000, "KEYS", l.tasksOf(next)).Err()) // next's record

	turns := c.Node(from).LRange(ctx, l.turns, 0, -1).Val()
	_, err = script.Try(ctx, q.rdb, dequeueScript, "take", l.common(l.inflight(q.proc)), l.commonArgs(q.proc, 1, promoteLimit)...)
	require.Error(t, err, "a take ran while its slot moved")
	assert.True(t, script.Moving(err), "%v", err)
	assert.EqualValues(t, 10, c.Node(from).LLen(ctx, l.ready).Val(), "the take popped ids")
	assert.Equal(t, turns, c.Node(from).LRange(ctx, l.turns, 0, -1).Val(), "the take popped a turn")

	// The move ends; the backlog runs, the first task too.
	require.NoError(t, c.MoveSlot(ctx, int(hslot), to, 100, 0))
	serve(t, q, echo, WithWorkers(2))
	for _, f := range backlog {
		_, err := wait(t, f, 20*time.Second)
		require.NoError(t, err, "task %s", f.ID())
	}
}

// A move longer than the TTL: the shard's keep-alives and its reaper
// wait for the move alike (a process whose keep-alive comes after the
// first reap is declared dead there, and its running tasks of the shard
// run again). Every acknowledged task still completes, Submits made
// during the move included, and the queue is left clean, its processes
// serving the shard. It also caught a feed bug: a shard whose ends went
// in a side call lost its next look (safetyPoll's), and, with no process
// in its idle set to wake, its 6 waiting tasks waited for ever (4 runs
// in 14 before the fix).
func TestAMoveLongerThanTheTTL(t *testing.T) {
	t.Parallel()
	c := redistest.StartCluster(t, 3)
	ctx := testCtx(t, 120*time.Second)
	name, _ := spreadQueueName(t, ctx, c)
	openOn := func() *Queue {
		return openOnCluster(t, ctx, c, name, WithShards(3), WithTTL(time.Second), WithCallTimeout(20*time.Second))
	}
	submitter, a, b := openOn(), openOn(), openOn()
	tenants := registerTenantsByShard(t, ctx, submitter, 3, 8)
	var runs sync.Map // id → *atomic.Int64
	handler := func(_ context.Context, t *Task) ([]byte, error) {
		n, _ := runs.LoadOrStore(t.ID, new(atomic.Int64))
		n.(*atomic.Int64).Add(1)
		time.Sleep(100 * time.Millisecond)
		return t.Payload, nil
	}
	serve(t, a, handler, WithWorkers(4))
	serve(t, b, handler, WithWorkers(4))
	var fs []*Future
	for i := range 60 {
		f, err := submitter.Submit(ctx, []byte(fmt.Sprint(i)), WithTenant(tenants[i%3]))
		require.NoError(t, err)
		fs = append(fs, f)
	}
	added, err := c.AddMaster(ctx)
	require.NoError(t, err)
	slot, err := c.Node(0).ClusterKeySlot(ctx, "shepherd:{"+shardName(name, 1)+"}:queue:settings").Result()
	require.NoError(t, err)
	moved := make(chan error, 1)
	began := time.Now()
	go func() { moved <- c.MoveSlot(ctx, int(slot), added, 1, 150*time.Millisecond) }()
	time.Sleep(200 * time.Millisecond)
	var during []*Future
	for i := range 6 {
		f, err := submitter.Submit(ctx, []byte(fmt.Sprint("d", i)), WithTenant(tenants[1]))
		require.NoError(t, err, "a Submit during the move")
		during = append(during, f)
	}
	require.NoError(t, <-moved)
	took := time.Since(began)
	require.Greater(t, took, 2*time.Second, "the move was not longer than the TTL")
	for i, f := range append(fs, during...) {
		res, err := f.Wait(testCtx(t, 30*time.Second))
		if err != nil {
			info, ierr := submitter.Inspect(ctx, f.ID())
			st, serr := submitter.Stats(ctx)
			n, _ := runs.Load(f.ID())
			l := submitter.known()[1]
			rdb := c.Client()
			t.Fatalf("task %d (%s): %v; inspect %+v %v; stats %+v %v; runs %v; shard 1: turns %v parked %v rated %v tenants %v members %v idle %v ready %v active %v",
				i, f.ID(), err, info, ierr, st, serr, n,
				rdb.LRange(ctx, l.turns, 0, -1).Val(), rdb.SMembers(ctx, l.parked).Val(), rdb.ZRangeWithScores(ctx, l.rated, 0, -1).Val(),
				rdb.HGetAll(ctx, l.tenants).Val(), rdb.HGetAll(ctx, l.alive).Val(), rdb.SMembers(ctx, l.idle).Val(),
				rdb.LRange(ctx, l.tenantReady(tenants[1], 0), 0, -1).Val(), rdb.HGetAll(ctx, l.active).Val())
		}
		want := fmt.Sprint(i)
		if i >= len(fs) {
			want = fmt.Sprint("d", i-len(fs))
		}
		assert.Equal(t, want, string(res))
	}
	again := 0
	runs.Range(func(_, v any) bool {
		if v.(*atomic.Int64).Load() > 1 {
			again++
		}
		return true
	})
	t.Logf("moved in %v; %d tasks ran more than once", took, again)
	require.Eventually(t, func() bool {
		st, err := submitter.Stats(ctx)
		return err == nil && st.Available+st.Delayed+st.Retrying+st.InFlight+st.Dead == 0 && len(st.Processes) == 3
	}, 10*time.Second, 50*time.Millisecond, "the queue was not left clean, its 3 processes registered")
	// The processes serve shard 1 again.
	f, err := submitter.Submit(ctx, []byte("after"), WithTenant(tenants[1]))
	require.NoError(t, err)
	res, err := wait(t, f, 10*time.Second)
	require.NoError(t, err)
	assert.Equal(t, "after", string(res))
}
