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
