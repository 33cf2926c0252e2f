package queue

import (
	"context"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/shepherd-go/shepherd/internal/rediscluster"
	"github.com/shepherd-go/shepherd/internal/redistest"
	"github.com/shepherd-go/shepherd/internal/testlog"
)

// A sharded queue on a Redis Cluster whose masters have a replica each:
// shard 1's master is killed with two of its tasks running, and its
// replica is promoted. The other shards' tasks go on meanwhile, not
// waiting for the failover; the held tasks complete once the replica
// serves; every shard takes and runs tasks after the failover, woken by
// its messages (the sharded pub/sub connection follows the new master),
// not by polls; Stats reads every shard and names shard 1's new master.
//
// The TTL (2 s) is shorter than the outage (the node timeout, 2 s, and
// the election): the processes are declared dead in shard 1 meanwhile, so
// the held tasks may run again (at least once), and the processes join
// shard 1 again.
func TestShardedQueueSurvivesAFailover(t *testing.T) {
	t.Parallel()
	res, runs := failover(t, 2*time.Second)
	t.Logf("the 2 held tasks ran %d times: %q", runs, res)
	for _, r := range res {
		assert.True(t, strings.HasPrefix(r, "held#"), "%q", r)
	}
}

// The same with a TTL longer than the outage: the processes keep their
// lease in shard 1, and the held tasks' ends, which waited in their
// process, are recorded by the promoted replica, which has their starts:
// each ran once.
func TestEndsRecordedAfterAFailover(t *testing.T) {
	t.Parallel()
	res, runs := failover(t, 20*time.Second)
	assert.Equal(t, []string{"held#1", "held#1"}, res)
	assert.EqualValues(t, 2, runs, "a held task ran again")
}

// failover runs the scenario of TestShardedQueueSurvivesAFailover with
// the queue's TTL ttl, and returns the held tasks' results and how many
// times they ran.
func failover(t *testing.T, ttl time.Duration) (held []string, heldRuns int64) {
	c := redistest.StartCluster(t, 3, rediscluster.WithReplicas(1),
		rediscluster.WithArgs("--cluster-require-full-coverage", "no"))
	ctx := testCtx(t, 90*time.Second)
	name, masters := spreadQueueName(t, ctx, c)
	replica := replicaOf(t, ctx, c, masters[1])
	openOn := func(opts ...Option) *Queue {
		return openOnCluster(t, ctx, c, name, append([]Option{WithTTL(ttl)}, opts...)...)
	}
	submitter := openOn(WithShards(3))
	tenants := registerTenantsByShard(t, ctx, submitter, 3, 4)
	reader, err := NewClient(c.NewClient(0), name) // reads only: it runs no script
	require.NoError(t, err)
	_, err = reader.Stats(ctx)
	require.NoError(t, err)
	release := make(chan struct{})
	var releaseOnce sync.Once
	free := func() { releaseOnce.Do(func() { close(release) }) }
	t.Cleanup(free) // before Close (cleanups run last first): no handler left blocked
	var runs atomic.Int64
	handler := func(ctx context.Context, task *Task) ([]byte, error) {
		if string(task.Payload) == "held" {
			runs.Add(1)
			<-release
		}
		return echo(ctx, task)
	}
	for range 2 {
		serve(t, openOn(), handler, WithWorkers(4))
	}
	// submit submits n tasks to each of shards (a tenant of each), whose
	// payloads are TAG-SHARD-I; complete checks each task's result.
	type submitted struct {
		f       *Future
		payload string
	}
	submit := func(shards []int, n int, tag string) []submitted {
		var out []submitted
		for i := range n {
			for _, s := range shards {
				p := fmt.Sprintf("%s-%d-%d", tag, s, i)
				f, err := submitter.Submit(ctx, []byte(p), WithTenant(tenants[s]))
				require.NoError(t, err)
				out = append(out, submitted{f, p})
			}
		}
		return out
	}
	complete := func(tasks []submitted, within time.Duration) {
		t.Helper()
		for _, task := range tasks {
			res, err := wait(t, task.f, within)
			require.NoError(t, err, "task %s", task.payload)
			require.Equal(t, task.payload+"#1", string(res))
		}
	}
	complete(submit([]int{0, 1, 2}, 3, "before"), 20*time.Second)

	var heldFs []*Future
	for range 2 {
		f, err := submitter.Submit(ctx, []byte("held"), WithTenant(tenants[1]))
		require.NoError(t, err)
		heldFs = append(heldFs, f)
	}
	require.Eventually(t, func() bool { return runs.Load() == 2 }, 20*time.Second, 5*time.Millisecond, "the held tasks did not start")
	// Everything written so far, the held tasks' starts too, reached the
	// replicas: a write on each master's connection, then WAIT for it
	// (replication is one stream: the earlier writes went before it).
	for s, m := range masters {
		conn := c.Node(m).Conn()
		require.NoError(t, conn.Set(ctx, "{"+shardName(name, s)+"}:replicated", "1", 0).Err())
		acked, err := conn.Do(ctx, "WAIT", 1, 2000).Int()
		_ = conn.Close()
		require.NoError(t, err)
		require.Equal(t, 1, acked, "shard %d's replica did not acknowledge", s)
	}

	// The replica may not take over until the other shards' tasks have
	// run: what follows cannot be waiting for the failover.
	require.NoError(t, c.Node(replica).ConfigSet(ctx, "cluster-replica-no-failover", "yes").Err())
	require.NoError(t, c.Kill(masters[1]))
	free() // the held tasks end; their ends cannot be recorded yet
	complete(submit([]int{0, 2}, 4, "during"), 30*time.Second)
	n, err := c.NodeOf(ctx, "shepherd:{"+shardName(name, 1)+"}:queue:settings")
	require.NoError(t, err)
	require.Equal(t, masters[1], n, "shard 1 was served again before the other shards' tasks ran")
	_, err = reader.Stats(ctx) // while shard 1 is down

	require.NoError(t, c.Node(replica).ConfigSet(ctx, "cluster-replica-no-failover", "no").Err())
	began := time.Now()
	require.NoError(t, c.WaitFailover(ctx, masters[1]))
	t.Logf("failover in %v", time.Since(began))
	// A reader's Stats names the new master at once.
	st, err := reader.Stats(ctx)
	require.NoError(t, err)
	assert.Equal(t, c.Addrs()[replica], st.PerShard[1].Master, "a reader's Stats names shard 1's dead master")
	began = time.Now()
	n, err = c.NodeOf(ctx, "shepherd:{"+shardName(name, 1)+"}:queue:settings")
	require.NoError(t, err)
	require.Equal(t, replica, n, "shard 1's replica does not serve it")

	for _, f := range heldFs {
		res, err := wait(t, f, 30*time.Second)
		require.NoError(t, err, "held task %s", f.ID())
		held = append(held, string(res))
	}
	heldRuns = runs.Load()
	t.Logf("the held tasks completed %v after the failover", time.Since(began))
	complete(submit([]int{0, 1, 2}, 3, "after"), 30*time.Second)

	// Once the processes have found the new master, an idle process is
	// woken for a task of shard 1 by its message, not by a poll (1 s).
	var took []time.Duration
	for range 10 {
		time.Sleep(20 * time.Millisecond) // the servers go idle: the next task needs a wake-up
		began := time.Now()
		complete(submit([]int{1}, 1, "woken"), 30*time.Second)
		took = append(took, time.Since(began))
	}
	slices.Sort(took)
	assert.Less(t, took[len(took)/2], 300*time.Millisecond, "median task of shard 1 after the failover waited for a poll: %v", took)

	st, err = submitter.Stats(ctx)
	require.NoError(t, err)
	require.Len(t, st.PerShard, 3)
	assert.Equal(t, c.Addrs()[replica], st.PerShard[1].Master, "Stats names shard 1's old master")
	assert.Zero(t, st.Available+st.Delayed+st.Retrying+st.InFlight, "tasks left: %+v", st.PerShard)
	return held, heldRuns
}

// A manual failover (CLUSTER FAILOVER on shard 1's replica) demotes a
// master that stays up: Redis unsubscribes the shard's channels on it
// (SUNSUBSCRIBE) and keeps the connection, and the process subscribes to
// them again, on the node the client says serves the shard (the new
// master, or the old one if the client has not heard yet: Redis sends a
// shard's messages to its replicas too). Its wake-ups and outcomes of
// shard 1 then come by message, not by the polls that stand in for lost
// ones (each 1 s).
func TestShardMessagesFollowAManualFailover(t *testing.T) {
	t.Parallel()
	c := redistest.StartCluster(t, 3, rediscluster.WithReplicas(1))
	ctx := testCtx(t, 90*time.Second)
	name, masters := spreadQueueName(t, ctx, c)
	replica := replicaOf(t, ctx, c, masters[1])
	q := openOnCluster(t, ctx, c, name, WithShards(3))
	tenants := registerTenantsByShard(t, ctx, q, 3, 4)
	serve(t, q, echo, WithWorkers(2))
	// median returns the median time of 5 tasks of shard 1, each
	// submitted to an idle server, which needs a wake-up to take it.
	median := func() time.Duration {
		var took []time.Duration
		for range 5 {
			time.Sleep(20 * time.Millisecond) // the server goes idle
			began := time.Now()
			f, err := q.Submit(ctx, []byte("x"), WithTenant(tenants[1]))
			require.NoError(t, err)
			res, err := wait(t, f, 10*time.Second)
			require.NoError(t, err)
			require.Equal(t, "x#1", string(res))
			took = append(took, time.Since(began))
		}
		slices.Sort(took)
		return took[len(took)/2]
	}
	require.Less(t, median(), 300*time.Millisecond, "wake-ups before the failover")
	// subscribers returns the number of subscribers to shard 1's wake-ups
	// on its two nodes.
	wakes := q.known()[1].wakeChannel()
	subscribers := func() int64 {
		var sum int64
		for _, n := range []int{masters[1], replica} {
			v, err := c.Node(n).Do(ctx, "PUBSUB", "SHARDNUMSUB", wakes).Slice()
			require.NoError(t, err)
			sum += v[1].(int64)
		}
		return sum
	}
	require.EqualValues(t, 1, subscribers())

	require.NoError(t, c.Node(replica).Do(ctx, "CLUSTER", "FAILOVER").Err())
	require.Eventually(t, func() bool {
		n, err := c.NodeOf(ctx, "shepherd:{"+shardName(name, 1)+"}:queue:settings")
		return err == nil && n == replica
	}, 20*time.Second, 20*time.Millisecond, "the replica did not take over")
	require.NotZero(t, c.Pids()[masters[1]], "the old master stays up")
	require.Eventually(t, func() bool { return subscribers() == 1 }, 10*time.Second, 20*time.Millisecond,
		"the process did not subscribe to shard 1's channels again")
	assert.Less(t, median(), 300*time.Millisecond, "tasks of shard 1 after the failover waited for polls")
}

// replicaOf returns the node index of master's one replica.
func replicaOf(t *testing.T, ctx context.Context, c *redistest.Cluster, master int) int {
	t.Helper()
	replicas, err := c.ReplicasOf(ctx, master)
	require.NoError(t, err)
	require.Len(t, replicas, 1)
	return replicas[0]
}

// WithReplicas on a Redis Cluster: each shard's WAIT goes to the shard's
// own master (a keyless WAIT would go to any node), so a Submit returns
// once the replica of its shard's master has the task, and an outcome is
// confirmed there; a shard whose replica is frozen refuses its Submits
// (ErrNotReplicated) while the others go on.
func TestWithReplicasOnRedisCluster(t *testing.T) {
	t.Parallel()
	c := redistest.StartCluster(t, 3, rediscluster.WithReplicas(1),
		rediscluster.WithArgs("--cluster-require-full-coverage", "no"))
	ctx := testCtx(t, 90*time.Second)
	name, masters := spreadQueueName(t, ctx, c)
	q := openOnCluster(t, ctx, c, name, WithShards(3), WithReplicas(1, 2*time.Second)) // the healthy WAITs must not time out on a loaded machine
	tenants := registerTenantsByShard(t, ctx, q, 3, 10)
	serve(t, q, echo)
	for shard, ten := range tenants {
		f, err := q.Submit(ctx, []byte("p"), WithTenant(ten))
		require.NoError(t, err, "shard %d", shard)
		res, err := wait(t, f, 20*time.Second)
		require.NoError(t, err)
		assert.Equal(t, "p#1", string(res))
		// The replica of the shard's master has the outcome.
		conn := c.Node(replicaOf(t, ctx, c, masters[shard])).Conn()
		require.NoError(t, conn.ReadOnly(ctx).Err())
		st, err := conn.HGet(ctx, q.known()[shard].task(f.ID()), fieldState).Result()
		_ = conn.Close()
		require.NoError(t, err)
		assert.Equal(t, "done", st, "shard %d", shard)
	}
	frozen := replicaOf(t, ctx, c, masters[1])
	pid := c.Pids()[frozen]
	require.NoError(t, syscall.Kill(pid, syscall.SIGSTOP))
	defer func() { _ = syscall.Kill(pid, syscall.SIGCONT) }()
	_, err := q.Submit(ctx, []byte("p"), WithTenant(tenants[1]))
	require.ErrorIs(t, err, ErrNotReplicated, "shard 1's replica is frozen")
	f, err := q.Submit(ctx, []byte("p"), WithTenant(tenants[0]))
	require.NoError(t, err, "shard 0 does not wait for shard 1's replica")
	_, err = wait(t, f, 20*time.Second)
	require.NoError(t, err)
}

// The load of the Sentinel failover tests on a sharded queue over a Redis
// Cluster whose masters have a replica each, with WithReplicas(1): shard
// 1's master is killed under load, its replica promoted, and the killed
// node comes back as the new master's replica. No acknowledged task is
// lost, no result undone, and the failover is reported.
func TestWithReplicasThroughAClusterFailover(t *testing.T) {
	t.Parallel()
	c := redistest.StartCluster(t, 3, rediscluster.WithReplicas(1),
		rediscluster.WithArgs("--cluster-require-full-coverage", "no"))
	ctx := testCtx(t, 120*time.Second)
	name, masters := spreadQueueName(t, ctx, c)
	load := newFailoverLoad()
	logs := &testlog.Buffer{}
	var qs []*Queue
	for range 2 {
		q := openOnCluster(t, ctx, c, name, WithShards(3), WithTTL(2*time.Second),
			WithReplicas(1, 500*time.Millisecond), WithLogger(slog.New(slog.NewTextHandler(logs, nil))))
		serve(t, q, load.handler, WithWorkers(4))
		qs = append(qs, q)
	}
	var wg sync.WaitGroup
	load.submit(ctx, qs[0], &wg)
	require.Eventually(t, func() bool { a, _, _, _ := load.count(); return a >= 300 }, 30*time.Second, 10*time.Millisecond)
	require.NoError(t, c.Kill(masters[1]))
	require.NoError(t, c.WaitFailover(ctx, masters[1]))
	require.NoError(t, c.Restart(ctx, masters[1]))
	acked0, _, _, _ := load.count()
	require.Eventually(t, func() bool { a, _, _, _ := load.count(); return a >= acked0+300 }, 60*time.Second, 10*time.Millisecond,
		"Submits did not resume after the failover")
	load.stop.Store(true)
	wg.Wait()
	acked, lost, undone, failedRan := load.count()
	t.Logf("%d acknowledged, %d lost, %d results undone, %d failed Submits ran", acked, lost, undone, failedRan)
	for id, err := range load.lost {
		t.Errorf("acknowledged task %s lost: %v", id, err)
	}
	assert.Zero(t, undone, "results undone by the failover")
	require.Eventually(t, func() bool { return len(logs.Lines("Redis failed over")) > 0 }, 10*time.Second, 10*time.Millisecond,
		"no process reported the failover")
	for _, line := range logs.Lines("Redis failed over") {
		t.Log(line)
	}
}
