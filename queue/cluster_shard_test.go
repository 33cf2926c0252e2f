package queue

import (
	"context"
	"fmt"
	"os"
	"runtime/pprof"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/redis/go-redis/v9/maintnotifications"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/shepherd-go/shepherd/internal/rediscluster"
	"github.com/shepherd-go/shepherd/internal/redistest"
)

// openOnCluster opens the queue name on a new client of cluster c (a
// process of its own), closed at the end of the test.
func openOnCluster(t *testing.T, ctx context.Context, c *redistest.Cluster, name string, opts ...Option) *Queue {
	t.Helper()
	q, err := Open(ctx, c.NewClient(0), name, opts...)
	require.NoError(t, err)
	t.Cleanup(func() { _ = closeWithin(q) })
	return q
}

// spreadQueueName returns a new queue name whose 3 shards' hash tags land
// on the cluster's 3 masters, one each, and the master of each shard.
func spreadQueueName(t *testing.T, ctx context.Context, c *redistest.Cluster) (string, []int) {
	t.Helper()
	for i := range 1000 {
		name := fmt.Sprintf("%s-%d", redistest.Name(t), i)
		masters := make([]int, 3)
		seen := map[int]bool{}
		for s := range 3 {
			n, err := c.NodeOf(ctx, "shepherd:{"+shardName(name, s)+"}:queue:settings")
			require.NoError(t, err)
			masters[s] = n
			seen[n] = true
		}
		if len(seen) == 3 {
			return name, masters
		}
	}
	t.Fatal("no queue name puts 3 shards on 3 masters")
	return "", nil
}

// A queue of 3 shards on a 3-master Redis Cluster: its shards on three
// masters, each master running its shard's scripts; tenants' tasks on
// their shards, the rest spread; and when one master is killed and
// restarted (AOF), every acknowledged task still completes once.
func TestShardedQueueOnRedisCluster(t *testing.T) {
	t.Parallel()
	c := redistest.StartCluster(t, 3, rediscluster.WithAOF())
	ctx := testCtx(t, 60*time.Second)
	name, masters := spreadQueueName(t, ctx, c)
	openOn := func(opts ...Option) *Queue {
		return openOnCluster(t, ctx, c, name, append([]Option{WithTTL(2 * time.Second)}, opts...)...)
	}
	submitter := openOn(WithShards(3))
	a, b := openOn(), openOn()
	require.Len(t, a.known(), 3, "the servers adopt the shard count")
	tenants := registerTenantsByShard(t, ctx, submitter, 3, 3)
	serve(t, a, echo, WithWorkers(3))
	serve(t, b, echo, WithWorkers(3))

	submit := func(n int, tag string) []*Future {
		var out []*Future
		for i := range n {
			var opts []SubmitOption
			if i%2 == 0 {
				opts = append(opts, WithTenant(tenants[i%3]))
			}
			f, err := submitter.Submit(ctx, []byte(fmt.Sprint(tag, i)), opts...)
			require.NoError(t, err)
			out = append(out, f)
		}
		return out
	}
	check := func(fs []*Future, tag string) {
		for i, f := range fs {
			res, err := wait(t, f, 30*time.Second)
			require.NoError(t, err, "task %s", f.ID())
			assert.Equal(t, fmt.Sprintf("%s%d#", tag, i), string(res[:len(res)-1]))
		}
	}
	before := submit(300, "a")
	check(before, "a")
	for s, m := range masters {
		st, err := c.Node(m).Info(ctx, "commandstats").Result()
		require.NoError(t, err)
		assert.Contains(t, st, "cmdstat_evalsha", "shard %d's master %d ran no script", s, m)
	}
	st, err := submitter.Stats(ctx)
	require.NoError(t, err)
	assert.Zero(t, st.Available+st.Delayed+st.Retrying+st.InFlight)
	assert.Len(t, st.Processes, 3)

	// Shard 1's master dies and comes back with its AOF: the tasks of
	// every shard complete, those of shard 1 once it is back.
	during := submit(60, "b")
	require.NoError(t, c.Kill(masters[1]))
	time.Sleep(300 * time.Millisecond)
	require.NoError(t, c.Restart(ctx, masters[1]))
	after := submit(60, "c")
	check(during, "b")
	check(after, "c")
}

// While one shard's master is down (a cluster that serves the slots it
// still covers), the other shards' tasks go on: each shard's lease and
// each shard's takes are their own. The shard comes back with its AOF.
func TestShardDownOthersGoOn(t *testing.T) {
	t.Parallel()
	c := redistest.StartCluster(t, 3, rediscluster.WithAOF(),
		rediscluster.WithArgs("--cluster-require-full-coverage", "no"))
	ctx := testCtx(t, 90*time.Second)
	name, masters := spreadQueueName(t, ctx, c)
	openOn := func(opts ...Option) *Queue {
		return openOnCluster(t, ctx, c, name, append([]Option{WithTTL(time.Second)}, opts...)...)
	}
	submitter := openOn(WithShards(3))
	tenants := registerTenantsByShard(t, ctx, submitter, 3, 4)
	for range 2 {
		serve(t, openOn(), echo, WithWorkers(2))
	}
	require.NoError(t, c.Kill(masters[1]))
	time.Sleep(1500 * time.Millisecond) // past the TTL: shard 1 judges nobody meanwhile
	var during []*Future
	for range 5 {
		for _, s := range []int{0, 2} {
			f, err := submitter.Submit(ctx, []byte("up"), WithTenant(tenants[s]))
			require.NoError(t, err)
			during = append(during, f)
		}
	}
	for _, f := range during {
		res, err := wait(t, f, 30*time.Second) // the shard that is down stays down: a task that waits for it never ends
		require.NoError(t, err, "a task of a shard that is up waited for the one that is down")
		assert.Equal(t, "up#1", string(res))
	}
	require.NoError(t, c.Restart(ctx, masters[1]))
	f, err := submitter.Submit(ctx, []byte("back"), WithTenant(tenants[1]))
	require.NoError(t, err)
	res, err := wait(t, f, 20*time.Second)
	require.NoError(t, err)
	assert.Equal(t, "back#1", string(res))
}

// Tasks of a shard are running when its master dies: their ends wait to
// be recorded until it is back, and meanwhile the same processes go on
// with the other shards' tasks; once it is back, the ends are recorded
// and their futures complete, once each.
func TestEndsOfAShardDownWaitOthersGoOn(t *testing.T) {
	t.Parallel()
	c := redistest.StartCluster(t, 3, rediscluster.WithAOF(),
		rediscluster.WithArgs("--cluster-require-full-coverage", "no"))
	ctx := testCtx(t, 90*time.Second)
	name, masters := spreadQueueName(t, ctx, c)
	// A TTL longer than the outage: the process is not declared dead in
	// the shard that was down, so its ends count.
	q := openOnCluster(t, ctx, c, name, WithShards(3))
	tenants := registerTenantsByShard(t, ctx, q, 3, 4)
	held, runs, free := serveHolding(t, ctx, q, tenants[1])
	require.NoError(t, c.Kill(masters[1]))
	free() // their ends cannot be recorded now
	var during []*Future
	for range 4 {
		for _, s := range []int{0, 2} {
			f, err := q.Submit(ctx, []byte("up"), WithTenant(tenants[s]))
			require.NoError(t, err)
			during = append(during, f)
		}
	}
	for _, f := range during {
		res, err := wait(t, f, 30*time.Second) // the shard that is down stays down: a task that waits for it never ends
		require.NoError(t, err, "a task of a shard that is up waited for the ends of the one that is down")
		assert.Equal(t, "up#1", string(res))
	}
	require.NoError(t, c.Restart(ctx, masters[1]))
	for _, f := range held {
		res, err := wait(t, f, 20*time.Second)
		require.NoError(t, err)
		assert.Equal(t, "held#1", string(res), "recorded once the shard was back, from its first attempt")
	}
	assert.EqualValues(t, 2+8, runs.Load(), "no task ran twice")
}

// A shard's master that freezes (SIGSTOP: its calls hang rather than
// fail) holds back its own shard only. While it is frozen, with ends of
// its tasks to record and Submits to it waiting out their call timeout,
// the other shards' tasks are submitted and run with no such timeout in
// their way: at most one may wait for the call that finds the shard
// frozen. Once it thaws, its ends are recorded.
func TestFrozenShardHoldsBackNoOtherShard(t *testing.T) {
	t.Parallel()
	c := redistest.StartCluster(t, 3, rediscluster.WithArgs("--cluster-require-full-coverage", "no"))
	ctx := testCtx(t, 120*time.Second)
	name, masters := spreadQueueName(t, ctx, c)
	// A TTL longer than the freeze: nobody is declared dead meanwhile.
	q := openOnCluster(t, ctx, c, name, WithShards(3), WithTTL(60*time.Second))
	tenants := registerTenantsByShard(t, ctx, q, 3, 4)
	held, _, free := serveHolding(t, ctx, q, tenants[1])

	pid := c.Pids()[masters[1]]
	require.NoError(t, syscall.Kill(pid, syscall.SIGSTOP))
	thaw := func() { _ = syscall.Kill(pid, syscall.SIGCONT) }
	t.Cleanup(thaw)
	free() // their ends wait for the frozen shard
	stop := make(chan struct{})
	var frozenSubmits sync.WaitGroup
	for range 2 * submitters {
		frozenSubmits.Add(1)
		go func() {
			defer frozenSubmits.Done()
			for {
				select {
				case <-stop:
					return
				default:
				}
				_, _ = q.Submit(ctx, []byte("frozen"), WithTenant(tenants[1])) // fails after its call timeout
			}
		}()
	}

	var slow []time.Duration
	tasks := 0
	for end := time.Now().Add(12 * time.Second); time.Now().Before(end); tasks++ {
		began := time.Now()
		f, err := q.Submit(ctx, []byte("up"), WithTenant(tenants[2*(tasks%2)]))
		require.NoError(t, err)
		res, err := wait(t, f, 30*time.Second)
		require.NoError(t, err)
		require.Equal(t, "up#1", string(res))
		if took := time.Since(began); took > 2*time.Second {
			slow = append(slow, took)
		}
	}
	close(stop)
	t.Logf("%d tasks of the shards that answer in 12 s, slower than 2 s: %v", tasks, slow)
	assert.LessOrEqual(t, len(slow), 1, "tasks of shards that answer waited for the frozen one: %v of %d", slow, tasks)

	thaw()
	for _, f := range held {
		res, err := wait(t, f, 30*time.Second)
		require.NoError(t, err)
		assert.Equal(t, "held#1", string(res), "recorded once the shard thawed, from its first attempt")
	}
	frozenSubmits.Wait()
}

// On a Redis Cluster the queue's messages go by sharded pub/sub: every
// master runs SPUBLISH for its shard and no classic PUBLISH (which the
// cluster would send to every node), and the wake-ups and outcomes
// arrive, not the polls that stand in for lost ones (each 1 s).
func TestClusterMessagesAreSharded(t *testing.T) {
	t.Parallel()
	c := redistest.StartCluster(t, 3)
	ctx := testCtx(t, 60*time.Second)
	name, masters := spreadQueueName(t, ctx, c)
	for _, m := range masters {
		require.NoError(t, c.Node(m).ConfigResetStat(ctx).Err())
	}
	q := openOnCluster(t, ctx, c, name, WithShards(3))
	tenants := registerTenantsByShard(t, ctx, q, 3, 4)
	serve(t, q, echo, WithWorkers(2))
	var took []time.Duration
	for i := range 30 {
		began := time.Now()
		f, err := q.Submit(ctx, []byte("x"), WithTenant(tenants[i%3]))
		require.NoError(t, err)
		res, err := wait(t, f, 10*time.Second)
		require.NoError(t, err)
		require.Equal(t, "x#1", string(res))
		took = append(took, time.Since(began))
		time.Sleep(20 * time.Millisecond) // the server goes idle: the next task needs a wake-up
	}
	slices.Sort(took)
	assert.Less(t, took[len(took)/2], 300*time.Millisecond, "median task waited for a poll: %v", took)
	for s, m := range masters {
		st, err := c.Node(m).Info(ctx, "commandstats").Result()
		require.NoError(t, err)
		assert.True(t, strings.Contains(st, "cmdstat_spublish:"), "shard %d's master %d ran no SPUBLISH", s, m)
		assert.False(t, strings.Contains(st, "cmdstat_publish:"), "shard %d's master %d ran a classic PUBLISH", s, m)
	}
}

// A user confined to one sharded queue's keys and channels on a Redis
// Cluster, with exactly ACLCommands and ClusterACLCommands, runs the
// queue's calls on every master; Redis denies nothing.
func TestShardedQueueAsACLUserOnRedisCluster(t *testing.T) {
	t.Parallel()
	c := redistest.StartCluster(t, 3)
	ctx := testCtx(t, 60*time.Second)
	name, _ := spreadQueueName(t, ctx, c)
	args := []any{"ACL", "SETUSER", "queue", "on", ">pw", "resetkeys", "resetchannels",
		"~shepherd:{" + name + "}:*", "&shepherd:{" + name + "}:*",
		"~shepherd:{" + name + "#*}:*", "&shepherd:{" + name + "#*}:*", "-@all"}
	for _, cmd := range strings.Fields(ACLCommands + " " + ClusterACLCommands) {
		args = append(args, cmd)
	}
	for i := range c.Masters() {
		require.NoError(t, c.Node(i).Do(ctx, args...).Err())
	}
	rdb := redis.NewClusterClient(&redis.ClusterOptions{Addrs: c.Addrs(), Username: "queue", Password: "pw",
		MaintNotificationsConfig: &maintnotifications.Config{Mode: maintnotifications.ModeDisabled}})
	t.Cleanup(func() { _ = rdb.Close() })

	q, err := Open(ctx, rdb, name, WithShards(3), WithTTL(time.Second))
	require.NoError(t, err)
	t.Cleanup(func() { _ = closeWithin(q) })
	tenants := registerTenantsByShard(t, ctx, q, 3, 2)
	srv := serve(t, q, func(ctx context.Context, task *Task) ([]byte, error) {
		if string(task.Payload) == "block" {
			<-ctx.Done()
			return nil, ctx.Err()
		}
		return echo(ctx, task)
	}, WithWorkers(4))
	for _, ten := range tenants {
		f, err := q.Submit(ctx, []byte("x"), WithTenant(ten))
		require.NoError(t, err)
		_, err = wait(t, f, 10*time.Second)
		require.NoError(t, err)
		blocked, err := q.Submit(ctx, []byte("block"), WithTenant(ten))
		require.NoError(t, err)
		require.Eventually(t, func() bool {
			info, err := q.Inspect(ctx, blocked.ID())
			return err == nil && info.State == StateActive
		}, 5*time.Second, 5*time.Millisecond)
		require.NoError(t, q.Cancel(ctx, blocked.ID()))
		_, err = wait(t, blocked, 5*time.Second)
		assert.ErrorIs(t, err, ErrCancelled)
		require.NoError(t, q.SetSchedule(ctx, "s-"+ten, "@every 1h", nil, WithTaskOptions(WithTenant(ten))))
		require.NoError(t, q.RemoveSchedule(ctx, "s-"+ten))
	}
	_, err = q.Stats(ctx)
	require.NoError(t, err)
	n, err := q.Drain(ctx)
	require.NoError(t, err)
	assert.Equal(t, 1, n)
	select {
	case <-srv.Done():
	case <-time.After(5 * time.Second):
		t.Fatal("the server did not drain")
	}
	require.NoError(t, q.Close(ctx))
	for i := range c.Masters() {
		res, err := c.Node(i).Do(ctx, "ACL", "LOG").Result()
		require.NoError(t, err)
		assert.Empty(t, res, "master %d denied the queue's user something", i)
	}
}

// A process closes while one shard's master is frozen: Close returns (an
// error: that shard did not answer), and the process has left the other
// shards at once, not after its lease runs out there.
func TestCloseWhileAShardIsFrozen(t *testing.T) {
	t.Parallel()
	c := redistest.StartCluster(t, 3, rediscluster.WithArgs("--cluster-require-full-coverage", "no"))
	ctx := testCtx(t, 60*time.Second)
	name, masters := spreadQueueName(t, ctx, c)
	q := openOnCluster(t, ctx, c, name, WithShards(3), WithTTL(60*time.Second), WithCallTimeout(time.Second))
	tenants := tenantsByShard(t, 3)
	require.NoError(t, q.SetTenant(ctx, tenants[1], 1))
	started := make(chan struct{}, 1)
	serve(t, q, func(ctx context.Context, task *Task) ([]byte, error) {
		started <- struct{}{}
		<-ctx.Done()
		return nil, ctx.Err()
	}, WithWorkers(1))
	_, err := q.Submit(ctx, []byte("held"), WithTenant(tenants[1]))
	require.NoError(t, err)
	awaitSignal(t, started, "started")

	pid := c.Pids()[masters[1]]
	require.NoError(t, syscall.Kill(pid, syscall.SIGSTOP))
	t.Cleanup(func() { _ = syscall.Kill(pid, syscall.SIGCONT) })
	closed := make(chan error, 1)
	go func() {
		cctx, cancel := context.WithTimeout(context.Background(), time.Second)
		defer cancel()
		closed <- q.Close(cctx)
	}()
	select {
	case err := <-closed:
		assert.Error(t, err, "the frozen shard did not answer")
	case <-time.After(20 * time.Second):
		_ = pprof.Lookup("goroutine").WriteTo(os.Stderr, 1)
		t.Fatal("Close did not return while a shard was frozen")
	}
	for _, s := range []int{0, 2} {
		l := q.known()[s]
		member, err := c.Node(masters[s]).HExists(ctx, l.alive, q.proc).Result()
		require.NoError(t, err)
		assert.False(t, member, "the process is still a member of shard %d", s)
	}
}

// serveHolding serves q with 4 workers that echo, and submits 2 tasks of
// tenant whose handlers hold them until free is called (at the latest
// when the test ends, before q closes: cleanups run last first); it
// returns once both run. runs counts the handlers' runs.
func serveHolding(t *testing.T, ctx context.Context, q *Queue, tenant string) (held []*Future, runs *atomic.Int64, free func()) {
	t.Helper()
	release := make(chan struct{})
	var releaseOnce sync.Once
	free = func() { releaseOnce.Do(func() { close(release) }) }
	t.Cleanup(free)
	runs = new(atomic.Int64)
	serve(t, q, func(ctx context.Context, task *Task) ([]byte, error) {
		runs.Add(1)
		if string(task.Payload) == "held" {
			<-release
		}
		return echo(ctx, task)
	}, WithWorkers(4))
	for range 2 {
		f, err := q.Submit(ctx, []byte("held"), WithTenant(tenant))
		require.NoError(t, err)
		held = append(held, f)
	}
	require.Eventually(t, func() bool { return runs.Load() == 2 }, 10*time.Second, 5*time.Millisecond, "the shard's tasks did not start")
	return held, runs, free
}
