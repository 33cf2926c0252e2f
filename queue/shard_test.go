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
)

// tenantsByShard returns, for each of n shards, a tenant id that lives
// there.
func tenantsByShard(t *testing.T, n int) []string {
	t.Helper()
	out := make([]string, n)
	found := 0
	for i := 0; found < n && i < 10_000; i++ {
		id := fmt.Sprintf("ten-%d", i)
		if s := shardOfKey(id, n); out[s] == "" {
			out[s] = id
			found++
		}
	}
	require.Equal(t, n, found)
	return out
}

// registerTenantsByShard registers, with capacity, a tenant for each of
// n shards (tenantsByShard), and returns them.
func registerTenantsByShard(t *testing.T, ctx context.Context, q interface {
	SetTenant(context.Context, string, int) error
}, n, capacity int) []string {
	t.Helper()
	tenants := tenantsByShard(t, n)
	for _, ten := range tenants {
		require.NoError(t, q.SetTenant(ctx, ten, capacity))
	}
	return tenants
}

// openSharded opens a new queue of 3 shards on srv, with a Client of it
// and a tenant of each shard registered with capacity.
func openSharded(t *testing.T, ctx context.Context, capacity int) (*Queue, *Client, []string) {
	t.Helper()
	name := redistest.Name(t)
	q := open(t, name, WithShards(3))
	c, err := NewClient(srv.Client(), name)
	require.NoError(t, err)
	return q, c, registerTenantsByShard(t, ctx, q, 3, capacity)
}

// shardHolding returns the shards of q that hold task id: its record, or
// its own key.
func shardHolding(t *testing.T, q *Queue, id string) []int {
	t.Helper()
	var in []int
	for _, l := range q.known() {
		n, err := srv.Client().Exists(context.Background(), l.task(id)).Result()
		require.NoError(t, err)
		rec, err := srv.Client().HExists(context.Background(), l.tasksOf(id), id).Result()
		require.NoError(t, err)
		if n == 1 || rec {
			in = append(in, l.shard)
		}
	}
	return in
}

func TestShardedQueueSpreadsItsTasksAndRunsThem(t *testing.T) {
	t.Parallel()
	ctx := testCtx(t, 30*time.Second)
	name := redistest.Name(t)
	q := open(t, name, WithShards(3))
	require.Len(t, q.known(), 3)
	for i, l := range q.known() {
		assert.Equal(t, i, l.shard)
		v, err := srv.Client().HMGet(ctx, l.settings, settingShards, settingTTL).Result()
		require.NoError(t, err)
		assert.Equal(t, []any{"3", "10000"}, v, "shard %d has a copy of the settings", i)
		alive, err := srv.Client().HExists(ctx, l.alive, q.Process()).Result()
		require.NoError(t, err)
		assert.True(t, alive, "the process keeps alive in shard %d", i)
	}
	assert.Contains(t, q.known()[1].settings, "{"+name+"#1}")

	tenants := registerTenantsByShard(t, ctx, q, 3, 2)
	var futures []*Future
	want := map[string]int{} // task → its shard
	for i := range 30 {
		var opts []SubmitOption
		shard := -1
		if i%2 == 0 {
			ten := tenants[i%3]
			opts = append(opts, WithTenant(ten))
			shard = shardOfKey(ten, 3)
		}
		f, err := q.Submit(ctx, []byte(fmt.Sprint(i)), opts...)
		require.NoError(t, err)
		carried := carriedShard(f.ID(), 3)
		require.GreaterOrEqual(t, carried, 0, "id %s carries its shard", f.ID())
		if shard >= 0 {
			assert.Equal(t, shard, carried, "a tenant's task is on its tenant's shard")
		}
		want[f.ID()] = carried
		futures = append(futures, f)
	}
	perShard := map[int]int{}
	for id, s := range want {
		assert.Equal(t, []int{s}, shardHolding(t, q, id), "task %s", id)
		perShard[s]++
	}
	assert.Len(t, perShard, 3, "the tasks are spread over every shard: %v", perShard)

	other := open(t, name) // adopts the shard count
	assert.Len(t, other.known(), 3)
	st, err := other.Stats(ctx)
	require.NoError(t, err)
	assert.Equal(t, 3, st.Shards)
	serve(t, q, echo, WithWorkers(2))
	serve(t, other, echo, WithWorkers(2))
	for _, f := range futures {
		res, err := wait(t, f, 20*time.Second)
		require.NoError(t, err)
		assert.NotEmpty(t, res)
	}

	_, err = Open(ctx, srv.Client(), name, WithShards(2))
	require.ErrorIs(t, err, ErrInvalidOption)
	assert.Contains(t, err.Error(), "has 3 shards, this process sets 2")
	_, err = Open(ctx, srv.Client(), name+"#1")
	require.ErrorIs(t, err, ErrInvalidOption, "'#' names the shards")
}

// An unsharded queue keeps the layout, the ids and the settings' shape it
// had (n = 1 is today's layout), and a process that sets more shards on
// it is refused, live processes or not.
func TestOneShardKeepsTheLayoutAndTheShardCountIsFixed(t *testing.T) {
	t.Parallel()
	ctx := testCtx(t, 10*time.Second)
	name := redistest.Name(t)
	q, err := Open(ctx, srv.Client(), name)
	require.NoError(t, err)
	f, err := q.Submit(ctx, []byte("x"))
	require.NoError(t, err)
	assert.NotContains(t, f.ID(), shardSep)
	assert.Equal(t, "shepherd:{"+name+"}:queue:task:"+f.ID(), q.lay.task(f.ID()))
	require.NoError(t, q.Close(ctx))
	_, err = Open(ctx, srv.Client(), name, WithShards(3))
	require.ErrorIs(t, err, ErrInvalidOption, "dormant, the queue still has 1 shard")
	keys, err := srv.Client().Keys(ctx, "shepherd:{"+name+"#*").Result()
	require.NoError(t, err)
	assert.Empty(t, keys, "the refused process wrote nothing")
}

// Invariant 15: with every worker busy on one shard's tasks, a task that
// comes on another shard starts at the next take, not after the backlog.
func TestNoShardStarves(t *testing.T) {
	t.Parallel()
	ctx := testCtx(t, 30*time.Second)
	q := open(t, redistest.Name(t), WithShards(3))
	tenants := registerTenantsByShard(t, ctx, q, 3, 100)
	var busy []*Future
	for range 60 {
		f, err := q.Submit(ctx, []byte("busy"), WithTenant(tenants[0]))
		require.NoError(t, err)
		busy = append(busy, f)
	}
	var mu sync.Mutex
	var order []string
	started := make(chan struct{}, 100)
	serve(t, q, func(_ context.Context, t *Task) ([]byte, error) {
		mu.Lock()
		order = append(order, string(t.Payload))
		mu.Unlock()
		started <- struct{}{}
		time.Sleep(2 * time.Millisecond)
		return nil, nil
	}, WithWorkers(1))
	for range 5 {
		<-started
	}
	late, err := q.Submit(ctx, []byte("late"), WithTenant(tenants[2]))
	require.NoError(t, err)
	mu.Lock()
	before := len(order)
	mu.Unlock()
	_, err = wait(t, late, 20*time.Second)
	require.NoError(t, err)
	mu.Lock()
	at := strings.Join(order, ",")
	pos := len(order) - 1
	mu.Unlock()
	assert.LessOrEqual(t, pos-before, shardTurnEvery+2, "the other shard's task waited behind the backlog: %s", at)
	for _, f := range busy {
		_, err := wait(t, f, 20*time.Second)
		require.NoError(t, err)
	}
}

// Caps stay exact per tenant, each tenant on its shard, with processes
// taking from every shard at once.
func TestShardedCapsHold(t *testing.T) {
	t.Parallel()
	ctx := testCtx(t, 30*time.Second)
	name := redistest.Name(t)
	q := open(t, name, WithShards(3))
	other := open(t, name)
	tenants := tenantsByShard(t, 3)
	var mu sync.Mutex
	running, peak := map[string]int{}, map[string]int{}
	h := func(_ context.Context, t *Task) ([]byte, error) {
		mu.Lock()
		running[t.Tenant]++
		peak[t.Tenant] = max(peak[t.Tenant], running[t.Tenant])
		mu.Unlock()
		time.Sleep(3 * time.Millisecond)
		mu.Lock()
		running[t.Tenant]--
		mu.Unlock()
		return nil, nil
	}
	for i, ten := range tenants {
		require.NoError(t, q.SetTenant(ctx, ten, i+1))
	}
	var futures []*Future
	for i := range 90 {
		f, err := q.Submit(ctx, nil, WithTenant(tenants[i%3]))
		require.NoError(t, err)
		futures = append(futures, f)
	}
	serve(t, q, h, WithWorkers(4))
	serve(t, other, h, WithWorkers(4))
	for _, f := range futures {
		_, err := wait(t, f, 20*time.Second)
		require.NoError(t, err)
	}
	mu.Lock()
	defer mu.Unlock()
	for i, ten := range tenants {
		assert.LessOrEqual(t, peak[ten], i+1, "tenant %s on shard %d", ten, i)
		assert.Positive(t, peak[ten])
	}
}

// A process killed with tasks of every shard in flight: each shard's
// reaper gives its tasks back, and they run again elsewhere.
func TestShardedKilledProcessTasksComeBack(t *testing.T) {
	t.Parallel()
	const ttl = time.Second
	name := redistest.Name(t)
	q := open(t, name, WithTTL(ttl), WithShards(3))
	c := startChild(t, name, ttl, 6, time.Minute)
	ctx := testCtx(t, 30*time.Second)
	var futures []*Future
	shards := map[int]bool{}
	for range 6 {
		f, err := q.Submit(ctx, []byte("x"), WithMaxAttempts(3))
		require.NoError(t, err)
		futures = append(futures, f)
		shards[carriedShard(f.ID(), 3)] = true
	}
	require.Len(t, shards, 3)
	require.Eventually(t, func() bool {
		n := 0
		for _, l := range q.known() {
			k, err := srv.Client().HLen(ctx, l.active).Result()
			if err != nil {
				return false
			}
			n += int(k)
		}
		return n == 6
	}, 10*time.Second, 5*time.Millisecond, "the child never took its tasks")
	require.NoError(t, c.cmd.Process.Kill())
	var attempts atomic.Int64
	serve(t, q, func(_ context.Context, t *Task) ([]byte, error) {
		attempts.Add(int64(t.Attempt))
		return []byte("ok"), nil
	}, WithWorkers(2))
	for _, f := range futures {
		res, err := wait(t, f, 15*time.Second)
		require.NoError(t, err)
		assert.Equal(t, "ok", string(res))
	}
	assert.Equal(t, int64(12), attempts.Load(), "each task ran a second attempt here")
}

// A delayed task on a shard other than the home one wakes the servers at
// its due time (each shard's take says when its next task is due).
func TestShardedDelayedTaskRunsWhenDue(t *testing.T) {
	t.Parallel()
	ctx := testCtx(t, 20*time.Second)
	q := open(t, redistest.Name(t), WithShards(3))
	tenants := tenantsByShard(t, 3)
	require.NoError(t, q.SetTenant(ctx, tenants[2], 1))
	ran := make(chan time.Time, 1)
	serve(t, q, func(_ context.Context, t *Task) ([]byte, error) {
		ran <- time.Now()
		return nil, nil
	}, WithWorkers(1))
	time.Sleep(50 * time.Millisecond) // the server's first takes found nothing: it waits
	sent := time.Now()
	f, err := q.Submit(ctx, nil, WithTenant(tenants[2]), WithDelay(300*time.Millisecond))
	require.NoError(t, err)
	_, err = wait(t, f, 10*time.Second)
	require.NoError(t, err)
	at := <-ran
	assert.GreaterOrEqual(t, at.Sub(sent), 300*time.Millisecond, "it ran before it was due")
	assert.Less(t, at.Sub(sent), 900*time.Millisecond, "it waited for the safety poll, not its due time")
}

// A batch lives in one shard: its untenanted tasks follow it, a tenant's
// task on another shard is refused, and WaitBatch finds it from another
// process.
func TestShardedBatch(t *testing.T) {
	t.Parallel()
	ctx := testCtx(t, 20*time.Second)
	name := redistest.Name(t)
	q := open(t, name, WithShards(3))
	tenants := registerTenantsByShard(t, ctx, q, 3, 5)
	b := q.NewBatch(CollectAll)
	first, err := b.Submit(ctx, nil, WithTenant(tenants[1]))
	require.NoError(t, err)
	for range 4 {
		f, err := b.Submit(ctx, nil)
		require.NoError(t, err)
		assert.Equal(t, 1, carriedShard(f.ID(), 3), "a batch's task follows its first")
	}
	_, err = b.Submit(ctx, nil, WithTenant(tenants[2]))
	require.ErrorIs(t, err, ErrInvalidOption)
	assert.Equal(t, 1, carriedShard(first.ID(), 3))
	serve(t, q, echo, WithWorkers(2))
	other := open(t, name)
	require.NoError(t, other.WaitBatch(ctx, b.ID()))
}

// The untenanted capacity is split over the shards: below the shard count
// a shard would get none, so it is refused.
func TestShardedUntenantedCapacityIsSplit(t *testing.T) {
	t.Parallel()
	ctx := testCtx(t, 10*time.Second)
	q := open(t, redistest.Name(t), WithShards(3))
	require.ErrorIs(t, q.SetUntenantedCapacity(ctx, 2), ErrInvalidOption)
	require.NoError(t, q.SetUntenantedCapacity(ctx, 4))
	var got []string
	for _, l := range q.known() {
		v, err := srv.Client().HGet(ctx, l.tenants, "u").Result()
		require.NoError(t, err)
		got = append(got, v)
	}
	assert.Equal(t, []string{"2", "1", "1"}, got)
	require.NoError(t, q.SetUntenantedCapacity(ctx, 0), "0 holds them all")
	require.NoError(t, q.SetUntenantedCapacity(ctx, -1))
}

// The queue's pause is written to every shard, and its rate split.
func TestShardedPauseAndRate(t *testing.T) {
	t.Parallel()
	ctx := testCtx(t, 10*time.Second)
	q := open(t, redistest.Name(t), WithShards(3))
	require.NoError(t, q.Pause(ctx))
	require.NoError(t, q.SetRate(ctx, Rate{N: 300, Per: time.Second, Burst: 6}))
	for _, l := range q.known() {
		v, err := srv.Client().HMGet(ctx, l.settings, "P", "r", "rq").Result()
		require.NoError(t, err)
		assert.Equal(t, []any{"1", "300/3000/2", "300/1000/6"}, v, "shard %d", l.shard)
	}
	var ran atomic.Int64
	serve(t, q, func(context.Context, *Task) ([]byte, error) { ran.Add(1); return nil, nil }, WithWorkers(2))
	var futures []*Future
	for range 6 {
		f, err := q.Submit(ctx, nil)
		require.NoError(t, err)
		futures = append(futures, f)
	}
	time.Sleep(200 * time.Millisecond) // long enough for a take of every shard
	assert.Zero(t, ran.Load(), "a task started on a paused queue")
	require.NoError(t, q.Resume(ctx))
	for _, f := range futures {
		_, err := wait(t, f, 10*time.Second)
		require.NoError(t, err)
	}
}

// Reshard moves what an idle queue keeps to the shards of the new count,
// and refuses while the queue is not idle.
func TestReshard(t *testing.T) {
	t.Parallel()
	ctx := testCtx(t, 30*time.Second)
	name := redistest.Name(t)
	rdb := srv.Client()
	q, err := Open(ctx, rdb, name)
	require.NoError(t, err)
	tenants := tenantsByShard(t, 3)
	for i, ten := range tenants {
		require.NoError(t, q.SetTenant(ctx, ten, i+1))
	}
	require.NoError(t, q.SetTenantRate(ctx, tenants[1], Rate{N: 10, Per: time.Second}))
	require.NoError(t, q.PauseTenant(ctx, tenants[2]))
	require.NoError(t, q.SetRate(ctx, Rate{N: 300, Per: time.Second}))
	require.NoError(t, q.SetUntenantedCapacity(ctx, 7))
	f, err := q.Submit(ctx, nil, WithDelay(time.Hour))
	require.NoError(t, err)

	c, err := NewClient(rdb, name)
	require.NoError(t, err)
	err = c.Reshard(ctx, 3)
	require.ErrorIs(t, err, ErrInvalidOption)
	assert.Contains(t, err.Error(), "is live")
	require.NoError(t, q.Close(ctx))
	err = c.Reshard(ctx, 3)
	require.ErrorIs(t, err, ErrInvalidOption)
	assert.Contains(t, err.Error(), "1 unfinished tasks")
	require.NoError(t, c.Cancel(ctx, f.ID()))
	require.ErrorIs(t, c.Reshard(ctx, 0), ErrInvalidOption)

	require.NoError(t, c.Reshard(ctx, 3))
	q, err = Open(ctx, rdb, name)
	require.NoError(t, err)
	require.Len(t, q.known(), 3, "a process that sets nothing opens the new count")
	for i, ten := range tenants {
		l := q.known()[i]
		v, err := rdb.HMGet(ctx, l.tenants, "c:"+ten, "u").Result()
		require.NoError(t, err)
		assert.Equal(t, []any{fmt.Sprint(i + 1), fmt.Sprint(share(7, i, 3))}, v, "shard %d", i)
		if i > 0 {
			n, err := rdb.HExists(ctx, q.lay.tenants, "c:"+ten).Result()
			require.NoError(t, err)
			assert.False(t, n, "tenant %s left the home shard", ten)
		}
	}
	r1, err := rdb.HGet(ctx, q.known()[1].tenants, "r:"+tenants[1]).Result()
	require.NoError(t, err)
	assert.Equal(t, Rate{N: 10, Per: time.Second}.spec(), r1)
	p2, err := rdb.HGet(ctx, q.known()[2].tenants, "p:"+tenants[2]).Result()
	require.NoError(t, err)
	assert.Equal(t, "1", p2)
	rq, err := rdb.HMGet(ctx, q.known()[2].settings, "r", "rq").Result()
	require.NoError(t, err)
	assert.Equal(t, []any{"300/3000/2", "300/1000/6"}, rq)

	g, err := q.Submit(ctx, []byte("after"), WithTenant(tenants[1]))
	require.NoError(t, err, "the tenant is allowed on its new shard")
	assert.Equal(t, 1, carriedShard(g.ID(), 3))
	serve(t, q, echo, WithWorkers(1))
	res, err := wait(t, g, 10*time.Second)
	require.NoError(t, err)
	assert.Equal(t, "after#1", string(res))
	require.NoError(t, q.Close(ctx))

	require.NoError(t, c.Reshard(ctx, 1))
	keys, err := rdb.Keys(ctx, "shepherd:{"+name+"#*").Result()
	require.NoError(t, err)
	assert.Empty(t, keys, "the dropped shards are deleted")
	all, err := rdb.HGetAll(ctx, q.lay.tenants).Result()
	require.NoError(t, err)
	for i, ten := range tenants {
		assert.Equal(t, fmt.Sprint(i+1), all["c:"+ten])
	}
	assert.Equal(t, "7", all["u"])
	q, err = Open(ctx, rdb, name)
	require.NoError(t, err)
	assert.Len(t, q.known(), 1)
	require.NoError(t, q.Close(ctx))
}

// A caller's id may not look like one that carries a shard: the queue
// would look for it in that shard only.
func TestTaskIDMayNotLookSharded(t *testing.T) {
	t.Parallel()
	ctx := testCtx(t, 5*time.Second)
	q := open(t, redistest.Name(t))
	for _, id := range []string{"1~x", "0~", "255~a"} {
		_, err := q.Submit(ctx, nil, WithTaskID(id))
		require.ErrorIs(t, err, ErrInvalidOption, id)
	}
	for _, id := range []string{"~x", "a1~x", "01~x", "1000~x", "x~1"} {
		_, err := q.Submit(ctx, nil, WithTaskID(id))
		require.NoError(t, err, id)
	}
}

// A draining server of a sharded queue runs the due work of every shard,
// then stops; Client.Drain reaches the servers of a sharded queue too.
func TestShardedDrain(t *testing.T) {
	t.Parallel()
	ctx := testCtx(t, 20*time.Second)
	name := redistest.Name(t)
	q := open(t, name, WithShards(3), WithTTL(time.Second))
	var futures []*Future
	shards := map[int]bool{}
	for _, ten := range tenantsByShard(t, 3) {
		require.NoError(t, q.SetTenant(ctx, ten, 2))
		for range 4 {
			f, err := q.Submit(ctx, nil, WithTenant(ten))
			require.NoError(t, err)
			futures = append(futures, f)
			shards[carriedShard(f.ID(), 3)] = true
		}
	}
	for i := range 6 {
		f, err := q.Submit(ctx, nil, WithTaskID(fmt.Sprint("own-", i)))
		require.NoError(t, err)
		futures = append(futures, f)
	}
	require.Len(t, shards, 3)
	s := serve(t, q, echo, WithWorkers(2), WithMode(ModeDrain))
	select {
	case <-s.Done():
	case <-ctx.Done():
		t.Fatal("the draining server did not stop")
	}
	for _, f := range futures {
		_, err := wait(t, f, time.Second)
		require.NoError(t, err, "a task left behind by the drained server")
	}

	other := open(t, name, WithTTL(time.Second)) // keeps alive every 333ms
	s2 := serve(t, other, echo, WithWorkers(1))
	modes(t, &q.Client, map[string]string{other.Process(): "serve", q.Process(): ""})
	asked, err := q.Drain(ctx)
	require.NoError(t, err)
	assert.Equal(t, 1, asked)
	select {
	case <-s2.Done():
	case <-ctx.Done():
		t.Fatal("Client.Drain did not drain the sharded queue's server")
	}
}

// Reshard to the count a queue has changes nothing, idle or not.
func TestReshardToTheSameCountIsNothing(t *testing.T) {
	t.Parallel()
	ctx := testCtx(t, 10*time.Second)
	q := open(t, redistest.Name(t), WithShards(2))
	require.NoError(t, q.Reshard(ctx, 2), "a live queue, but nothing to do")
	assert.ErrorIs(t, q.Reshard(ctx, 3), ErrInvalidOption)
}

// While a reshard is under way (or was left midway) Open refuses the
// queue; once it is done, Open works.
func TestOpenIsRefusedWhileResharding(t *testing.T) {
	t.Parallel()
	ctx := testCtx(t, 10*time.Second)
	name := redistest.Name(t)
	q, err := Open(ctx, srv.Client(), name)
	require.NoError(t, err)
	require.NoError(t, q.Close(ctx))
	require.NoError(t, srv.Client().HSet(ctx, q.lay.settings, "reshard_from", 1).Err()) // as a reshard midway
	_, err = Open(ctx, srv.Client(), name)
	require.Error(t, err)
	assert.Contains(t, err.Error(), "being resharded")
	c, err := NewClient(srv.Client(), name)
	require.NoError(t, err)
	require.NoError(t, c.Reshard(ctx, 2), "a reshard left midway is finished by the next")
	q, err = Open(ctx, srv.Client(), name)
	require.NoError(t, err)
	assert.Len(t, q.known(), 2)
	require.NoError(t, q.Close(ctx))
}

// A shard whose Redis lost its state (a master restarted empty): the
// processes find themselves gone there, register again in every shard,
// and the shard serves again.
func TestALostShardIsJoinedAgain(t *testing.T) {
	t.Parallel()
	ctx := testCtx(t, 20*time.Second)
	name := redistest.Name(t)
	q := open(t, name, WithShards(3), WithTTL(time.Second))
	serve(t, q, echo, WithWorkers(1))
	l := q.known()[1]
	keys := redistest.Keys(t, srv.Client(), "shepherd:{"+shardName(name, 1)+"}:*")
	require.NotEmpty(t, keys)
	require.NoError(t, srv.Client().Del(ctx, keys...).Err())
	require.Eventually(t, func() bool {
		ok, err := srv.Client().HExists(ctx, l.alive, q.Process()).Result()
		return err == nil && ok
	}, 10*time.Second, 20*time.Millisecond, "the process did not join the lost shard again")
	tenants := tenantsByShard(t, 3)
	require.NoError(t, q.SetTenant(ctx, tenants[1], 1))
	f, err := q.Submit(ctx, []byte("back"), WithTenant(tenants[1]))
	require.NoError(t, err)
	res, err := wait(t, f, 10*time.Second)
	require.NoError(t, err)
	assert.Equal(t, "back#1", string(res))
}

// Reshard of a queue Redis does not hold writes nothing.
func TestReshardOfAMissingQueue(t *testing.T) {
	t.Parallel()
	ctx := testCtx(t, 5*time.Second)
	name := redistest.Name(t)
	c, err := NewClient(srv.Client(), name)
	require.NoError(t, err)
	require.ErrorIs(t, c.Reshard(ctx, 3), ErrQueueNotFound)
	assert.Empty(t, redistest.Keys(t, srv.Client(), "*"+name+"*"))
}

// A process declared dead in one shard only (cut off from it past the
// TTL) abandons that shard's tasks and joins it again; its tasks in the
// other shards run on, and their outcomes count.
func TestDeclaredDeadInOneShardOnly(t *testing.T) {
	t.Parallel()
	ctx := testCtx(t, 20*time.Second)
	q := open(t, redistest.Name(t), WithShards(3), WithTTL(time.Second))
	tenants := tenantsByShard(t, 3)
	require.NoError(t, q.SetTenant(ctx, tenants[0], 1))
	release := make(chan struct{})
	var once sync.Once
	free := func() { once.Do(func() { close(release) }) }
	t.Cleanup(free)
	started := make(chan struct{}, 4)
	var runs atomic.Int64
	serve(t, q, func(ctx context.Context, task *Task) ([]byte, error) {
		runs.Add(1)
		started <- struct{}{}
		<-release
		return echo(ctx, task)
	}, WithWorkers(1))
	f, err := q.Submit(ctx, []byte("x"), WithTenant(tenants[0]))
	require.NoError(t, err)
	awaitSignal(t, started, "started")
	l := q.known()[2]
	require.NoError(t, srv.Client().HDel(ctx, l.alive, q.Process()).Err()) // as shard 2's reaper does
	require.Eventually(t, func() bool {
		ok, err := srv.Client().HExists(ctx, l.alive, q.Process()).Result()
		return err == nil && ok
	}, 10*time.Second, 10*time.Millisecond, "the process did not join shard 2 again")
	free()
	res, err := wait(t, f, 10*time.Second)
	require.NoError(t, err)
	assert.Equal(t, "x#1", string(res))
	assert.EqualValues(t, 1, runs.Load(), "the task of shard 0 was abandoned, and ran again")
}

// Stats.PerShard has each shard's part of the depths, and its tenants;
// the totals are their sums. Off a cluster no shard names a master.
func TestStatsPerShard(t *testing.T) {
	t.Parallel()
	ctx := testCtx(t, 20*time.Second)
	name := redistest.Name(t)
	q, err := Open(ctx, srv.Client(), name, WithShards(3))
	require.NoError(t, err)
	t.Cleanup(func() { _ = closeWithin(q) })
	tenants := registerTenantsByShard(t, ctx, q, 3, 1)
	for _, s := range []struct {
		shard int
		opts  []SubmitOption
	}{{1, nil}, {1, nil}, {2, nil}, {0, []SubmitOption{WithDelay(time.Hour)}}} {
		_, err := q.Submit(ctx, nil, append(s.opts, WithTenant(tenants[s.shard]))...)
		require.NoError(t, err)
	}
	st, err := q.Stats(ctx)
	require.NoError(t, err)
	require.Len(t, st.PerShard, 3)
	for i, s := range st.PerShard {
		assert.Equal(t, i, s.Shard)
		assert.Equal(t, shardName(name, i), s.Tag)
		assert.Empty(t, s.Master)
		assert.Equal(t, 1, s.Tenants, "shard %d", i)
	}
	assert.Equal(t, []int64{0, 2, 1}, []int64{st.PerShard[0].Available, st.PerShard[1].Available, st.PerShard[2].Available})
	assert.EqualValues(t, 1, st.PerShard[0].Delayed)
	assert.EqualValues(t, 3, st.Available)
	assert.EqualValues(t, 1, st.Delayed)
}

// A shard's safety poll survives its ends going in a side call. The
// server takes task A of shard 1 and finds nothing more there (it waits
// for a wake-up, or its safety poll in 1 s), then takes B of shard 0;
// A ends while the server works shard 0, so A's end goes in a side call.
// A wake-up for shard 1 is then lost (the process is gone from its idle
// set, as after being declared dead there): task C of shard 1 must still
// start, at the safety poll. Before the fix the side call cleared the
// poll and C never started.
func TestShardSafetyPollSurvivesASideCall(t *testing.T) {
	t.Parallel()
	ctx := testCtx(t, 30*time.Second)
	name := redistest.Name(t)
	q := open(t, name, WithShards(2))
	tenants := registerTenantsByShard(t, ctx, q, 2, 4)
	started := make(chan string, 8)
	release := map[string]chan struct{}{"A": make(chan struct{}), "B": make(chan struct{}), "C": make(chan struct{})}
	close(release["C"])
	serve(t, q, func(ctx context.Context, t *Task) ([]byte, error) {
		started <- string(t.Payload)
		select {
		case <-release[string(t.Payload)]:
		case <-ctx.Done():
		}
		return nil, nil
	}, WithWorkers(2))
	next := func(want string) {
		t.Helper()
		select {
		case got := <-started:
			require.Equal(t, want, got)
		case <-time.After(5 * time.Second):
			t.Fatalf("task %s did not start", want)
		}
	}
	time.Sleep(50 * time.Millisecond) // the server's first takes find nothing: idle in both shards
	a, err := q.Submit(ctx, []byte("A"), WithTenant(tenants[1]))
	require.NoError(t, err)
	next("A")
	_, err = q.Submit(ctx, []byte("B"), WithTenant(tenants[0]))
	require.NoError(t, err)
	next("B")
	close(release["A"])
	_, err = wait(t, a, 5*time.Second)
	require.NoError(t, err)
	require.NoError(t, srv.Client().SRem(ctx, q.known()[1].idle, q.proc).Err()) // a lost wake-up
	_, err = q.Submit(ctx, []byte("C"), WithTenant(tenants[1]))
	require.NoError(t, err)
	select {
	case got := <-started:
		assert.Equal(t, "C", got)
	case <-time.After(3 * time.Second):
		t.Fatal("task C of shard 1 did not start within 3 s: no safety poll")
	}
	close(release["B"])
}
