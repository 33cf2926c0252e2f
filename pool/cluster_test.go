package pool

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/shepherd-go/shepherd/internal/redistest"
)

// A pool on a real 3-master Redis Cluster lives in one slot, which may
// move to another master (as when the cluster scales out) while the pool
// runs: jobs dispatched before, during and after the move each run once,
// a job stopped during the move stops, a notification sent during it
// arrives, and a worker added after it gets its share. The move (about
// 2 s) is shorter than the workers' TTL: a longer one is an outage of the
// pool's Redis, after which the workers are declared dead and their jobs
// start again elsewhere.
func TestPoolOnRedisClusterWhileItsSlotMoves(t *testing.T) {
	t.Parallel()
	c := redistest.StartCluster(t, 3)
	ctx := testCtx(t, 90*time.Second)
	pool := redistest.Name(t)
	r1, r2 := newRecorder(), newRecorder()
	ttl := WithWorkerTTL(5 * time.Second)
	n1 := addNode(t, c.NewClient(0), pool, ttl)
	n2 := addNode(t, c.NewClient(0), pool, ttl)
	addWorkers(t, n1, r1, 2)
	addWorkers(t, n2, r2, 2)
	want := map[string]int{}
	for i := range 40 {
		require.NoError(t, n1.DispatchJob(ctx, keyN(i), []byte("p")))
		want[keyN(i)] = 1
	}
	require.Equal(t, want, union(r1, r2))

	settings := "shepherd:{" + pool + "}:pool:settings"
	from, err := c.NodeOf(ctx, settings)
	require.NoError(t, err)
	slot, err := c.Node(0).ClusterKeySlot(ctx, settings).Result()
	require.NoError(t, err)
	moved := make(chan error, 1)
	began := time.Now()
	go func() { moved <- c.MoveSlot(ctx, int(slot), (from+1)%3, 1, 100*time.Millisecond) }()
	// During the move: new jobs, a stop, a notification.
	var wg sync.WaitGroup
	errs := make(chan error, 40)
	for i := 40; i < 60; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			errs <- n2.DispatchJob(ctx, keyN(i), []byte("p"))
		}()
		want[keyN(i)] = 1
	}
	require.NoError(t, n2.StopJob(ctx, keyN(0)))
	delete(want, keyN(0))
	require.NoError(t, n1.NotifyWorker(ctx, keyN(1), []byte("hi")))
	wg.Wait()
	close(errs)
	for err := range errs {
		assert.NoError(t, err)
	}
	require.NoError(t, <-moved)
	t.Logf("moved in %v", time.Since(began))
	to, err := c.NodeOf(ctx, settings)
	require.NoError(t, err)
	require.Equal(t, (from+1)%3, to)

	r3 := newRecorder()
	n3 := addNode(t, c.NewClient(0), pool, ttl)
	addWorkers(t, n3, r3, 2)
	for i := 60; i < 70; i++ {
		require.NoError(t, n3.DispatchJob(ctx, keyN(i), []byte("p")))
		want[keyN(i)] = 1
	}
	require.Eventually(t, func() bool {
		return fmt.Sprint(union(r1, r2, r3)) == fmt.Sprint(want) && len(r3.runningKeys()) > 0
	}, 30*time.Second, 50*time.Millisecond, "running %v", union(r1, r2, r3))
	var got [][]byte
	for _, r := range []*recorder{r1, r2} {
		r.mu.Lock()
		got = append(got, r.notified[keyN(1)]...)
		r.mu.Unlock()
	}
	assert.Equal(t, [][]byte{[]byte("hi")}, got, "the notification sent during the move")
	st, err := c.Node(to).Info(context.Background(), "commandstats").Result()
	require.NoError(t, err)
	assert.Contains(t, st, "cmdstat_evalsha", "the new master ran no script of the pool")

	// A schedule and a ticker, through the Cluster client, on the new
	// master.
	sp := &producer{name: "cluster"}
	sp.set(&JobPlan{Jobs: jobsOf("p", "planned-1", "planned-2")}, ErrEndSchedule)
	require.NoError(t, n1.Schedule(ctx, sp, 50*time.Millisecond))
	tk, err := n2.NewTicker(ctx, "cluster", 20*time.Millisecond)
	require.NoError(t, err)
	defer tk.Stop()
	select {
	case <-tk.C:
	case <-time.After(10 * time.Second):
		t.Fatal("no tick on the cluster")
	}
	require.Eventually(t, func() bool {
		running := union(r1, r2, r3)
		return running["planned-1"] == 1 && running["planned-2"] == 1
	}, 10*time.Second, 10*time.Millisecond, "the planned jobs run")
}

// A pool of 3 shards on a 3-master Redis Cluster: the operator places
// each shard on its own master by moving its slot (while jobs run and
// more are dispatched), after which each master holds a third of the
// pool's jobs or so, every key runs once, and Stats adds the masters up.
func TestShardedPoolOnRedisClusterSpreadsOverMasters(t *testing.T) {
	t.Parallel()
	c := redistest.StartCluster(t, 3)
	ctx := testCtx(t, 120*time.Second)
	// A fixed name (the cluster is the test's own): its shards' slots are
	// known to differ, and which moves the test makes does not vary.
	pool := "sharded"
	r1, r2 := newRecorder(), newRecorder()
	ttl := WithWorkerTTL(5 * time.Second)
	n1 := addNode(t, c.NewClient(64), pool, ttl, WithShards(3))
	n2 := addNode(t, c.NewClient(64), pool, ttl)
	addWorkers(t, n1, r1, 2)
	addWorkers(t, n2, r2, 2)
	want := map[string]int{}
	for i := range 90 {
		require.NoError(t, n1.DispatchJob(ctx, keyN(i), []byte("p")))
		want[keyN(i)] = 1
	}
	require.Equal(t, want, union(r1, r2))

	// Place the shards: one per master.
	lays := make([]layout, 3)
	masterOf := func(i int) int {
		m, err := c.NodeOf(ctx, lays[i].jobs)
		require.NoError(t, err)
		return m
	}
	for i := range 3 {
		var err error
		lays[i], err = newLayout(shardName(pool, i))
		require.NoError(t, err)
	}
	// Shard i goes to master i.
	moves := 0
	for i := range 3 {
		if masterOf(i) == i {
			continue
		}
		moves++
		slot, err := c.Node(0).ClusterKeySlot(ctx, lays[i].jobs).Result()
		require.NoError(t, err)
		moved := make(chan error, 1)
		go func() { moved <- c.MoveSlot(ctx, int(slot), i, 10, 20*time.Millisecond) }()
		for j := 90 + 10*i; j < 100+10*i; j++ { // dispatches during the move
			require.NoError(t, n2.DispatchJob(ctx, keyN(j), []byte("p")))
			want[keyN(j)] = 1
		}
		require.NoError(t, <-moved)
		require.Equal(t, i, masterOf(i))
	}
	t.Logf("%d shards moved", moves)
	require.Eventually(t, func() bool { return fmt.Sprint(union(r1, r2)) == fmt.Sprint(want) },
		30*time.Second, 20*time.Millisecond, "running %v", union(r1, r2))
	for k, n := range r1.starts {
		assert.Equal(t, 1, n+r2.starts[k], "key %s started more than once", k)
	}

	// Each master holds its shard's jobs: about a third each.
	for i := range 3 {
		jobs, err := c.Client().HLen(ctx, lays[i].jobs).Result()
		require.NoError(t, err)
		share := float64(jobs) / float64(len(want))
		assert.Greater(t, share, 0.2, "shard %d on master %d holds %d of %d jobs", i, masterOf(i), jobs, len(want))
		assert.Less(t, share, 0.47, "shard %d on master %d holds %d of %d jobs", i, masterOf(i), jobs, len(want))
	}
	st, err := Inspect(ctx, c.Client(), pool)
	require.NoError(t, err)
	assert.Equal(t, 3, st.Shards)
	assert.Equal(t, len(want), st.Running)
	assert.Len(t, st.Workers, 4)
	require.NoError(t, n1.StopJob(ctx, keyN(0)))
	delete(want, keyN(0))
	require.NoError(t, n2.NotifyWorker(ctx, keyN(1), []byte("hi")))
	require.Equal(t, want, union(r1, r2))
}
