package pool

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/redis/go-redis/v9/maintnotifications"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/shepherd-go/shepherd/internal/redistest"
)

// shardJobs returns how many jobs each shard of pool holds, read from
// Redis directly (shard i's hash tag is {pool#i}).
func shardJobs(t *testing.T, ctx context.Context, pool string, shards int) []int64 {
	t.Helper()
	out := make([]int64, shards)
	for i := range shards {
		lay, err := newLayout(shardName(pool, i))
		require.NoError(t, err)
		out[i], err = srv.Client().HLen(ctx, lay.jobs).Result()
		require.NoError(t, err)
	}
	return out
}

// A pool of 4 shards keeps each job in its key's shard, runs every key
// once across two nodes, answers every call on any key from any node,
// adds its shards up in Stats and Inspect, moves a closing node's jobs in
// every shard, and Shutdown deletes every shard's keys.
func TestShardedPoolRunsEachKeyOnceAndAddsUp(t *testing.T) {
	t.Parallel()
	ctx := testCtx(t, 60*time.Second)
	pool := redistest.Name(t)
	r1, r2 := newRecorder(), newRecorder()
	n1 := addNode(t, srv.NewClient(), pool, WithShards(4))
	n2 := addNode(t, srv.NewClient(), pool) // adopts the pool's 4
	require.Len(t, n2.parts, 4)
	addWorkers(t, n1, r1, 2)
	addWorkers(t, n2, r2, 2)

	const jobs = 200
	want := map[string]int{}
	for i := range jobs {
		from := n1
		if i%2 == 1 {
			from = n2
		}
		require.NoError(t, from.DispatchJob(ctx, keyN(i), []byte("p")))
		want[keyN(i)] = 1
	}
	require.Equal(t, want, union(r1, r2))
	per := shardJobs(t, ctx, pool, 4)
	var total int64
	for i, c := range per {
		assert.Positive(t, c, "shard %d holds none of %d keys", i, jobs)
		total += c
	}
	require.EqualValues(t, jobs, total)
	// Each key in its own shard.
	for i := range jobs {
		lay, err := newLayout(shardName(pool, shardOfKey(keyN(i), 4)))
		require.NoError(t, err)
		ok, err := srv.Client().HExists(ctx, lay.jobs, keyN(i)).Result()
		require.NoError(t, err)
		require.True(t, ok, "key %s not in its shard", keyN(i))
	}

	for _, st := range []func() (*Stats, error){
		func() (*Stats, error) { return n1.Stats(ctx) },
		func() (*Stats, error) { return Inspect(ctx, srv.Client(), pool) },
	} {
		s, err := st()
		require.NoError(t, err)
		assert.Equal(t, jobs, s.Jobs)
		assert.Equal(t, jobs, s.Running)
		require.Len(t, s.Workers, 4, "each worker once, though it is in every shard")
		require.Len(t, s.Nodes, 2)
		sum := 0
		for _, w := range s.Workers {
			sum += w.Jobs
			assert.True(t, w.Healthy)
		}
		assert.Equal(t, jobs, sum)
		assert.Empty(t, s.Orphans)
	}
	keys, err := JobKeys(ctx, srv.Client(), pool)
	require.NoError(t, err)
	require.Len(t, keys, jobs)

	// Calls on any key, from either node, reach its shard.
	for i := range 8 {
		k := keyN(i)
		info, err := InspectJob(ctx, srv.Client(), pool, k)
		require.NoError(t, err)
		assert.Equal(t, JobRunning, info.State, k)
		require.NoError(t, n2.NotifyWorker(ctx, k, []byte("hi")))
		require.NoError(t, n1.StopJob(ctx, k))
		delete(want, k)
		_, err = n2.Job(ctx, k)
		require.ErrorIs(t, err, ErrJobNotFound)
	}
	require.Equal(t, want, union(r1, r2))
	assert.ErrorIs(t, n1.DispatchJob(ctx, keyN(10), nil), ErrJobExists)

	// A node closes: its jobs start on the other node's workers, in every
	// shard.
	require.NoError(t, n1.Close(ctx))
	require.Eventually(t, func() bool {
		got := r2.runningKeys()
		return len(got) == len(want) && len(r1.runningKeys()) == 0
	}, 20*time.Second, 20*time.Millisecond)
	require.Equal(t, want, r2.runningKeys())

	require.NoError(t, n2.Shutdown(ctx))
	for i := range 4 {
		left, err := srv.Client().Keys(ctx, "*{"+shardName(pool, i)+"}*").Result()
		require.NoError(t, err)
		assert.Empty(t, left, "shard %d", i)
	}
	select {
	case <-n2.Done():
	default:
		t.Fatal("Done not closed after Shutdown")
	}
}

// The shard count is the pool's, fixed when it is created: a node asking
// for another is refused and leaves nothing behind; one without
// WithShards adopts it; bad counts and names are refused at once.
func TestShardCountIsFixedAndChecked(t *testing.T) {
	t.Parallel()
	ctx := testCtx(t, 30*time.Second)
	pool := redistest.Name(t)
	n := addNode(t, srv.NewClient(), pool, WithShards(3))
	require.Len(t, n.parts, 3)

	_, err := AddNode(ctx, srv.Client(), pool, fastOpts(WithShards(2))...)
	require.ErrorIs(t, err, ErrInvalidOption)
	assert.Contains(t, err.Error(), "the pool has 3")
	s, err := Inspect(ctx, srv.Client(), pool)
	require.NoError(t, err)
	assert.Len(t, s.Nodes, 1, "the refused node left nothing")

	c := addNode(t, srv.NewClient(), pool, WithClientOnly())
	require.Len(t, c.parts, 3)

	for _, bad := range []int{0, -1, MaxShards + 1} {
		_, err := AddNode(ctx, srv.Client(), redistest.Name(t)+"-bad", WithShards(bad))
		require.ErrorIs(t, err, ErrInvalidOption, "shards %d", bad)
	}
	_, err = AddNode(ctx, srv.Client(), "a#1")
	require.ErrorIs(t, err, ErrInvalidOption)
	assert.Contains(t, err.Error(), "'#'")

	// A pool of one shard stays one: an old pool, which stored no count,
	// is read as one.
	one := redistest.Name(t) + "-one"
	o := addNode(t, srv.NewClient(), one)
	assert.Nil(t, o.parts)
	_, err = AddNode(ctx, srv.Client(), one, fastOpts(WithShards(2))...)
	require.ErrorIs(t, err, ErrInvalidOption)
}

// A worker serves every shard: RemoveWorker takes it out of all of them
// (its jobs move, in every shard, to the other worker), and a worker
// added later gets a share of every shard's keys.
func TestShardedWorkerJoinsAndLeavesEveryShard(t *testing.T) {
	t.Parallel()
	ctx := testCtx(t, 60*time.Second)
	pool := redistest.Name(t)
	r1, r2 := newRecorder(), newRecorder()
	n := addNode(t, srv.NewClient(), pool, WithShards(3))
	w1 := addWorkers(t, n, r1, 1)[0]
	want := map[string]int{}
	for i := range 90 {
		require.NoError(t, n.DispatchJob(ctx, keyN(i), nil))
		want[keyN(i)] = 1
	}
	require.Equal(t, want, r1.runningKeys())
	w2 := addWorkers(t, n, r2, 1)[0]
	// The new worker gets keys of every shard, each key running once.
	require.Eventually(t, func() bool {
		shards := map[int]bool{}
		for k := range r2.runningKeys() {
			shards[shardOfKey(k, 3)] = true
		}
		return len(shards) == 3 && fmt.Sprint(union(r1, r2)) == fmt.Sprint(want)
	}, 20*time.Second, 20*time.Millisecond, "r2 runs %v", r2.runningKeys())

	require.NoError(t, n.RemoveWorker(ctx, w1))
	assert.Empty(t, r1.runningKeys(), "RemoveWorker returned before its jobs stopped")
	require.Eventually(t, func() bool { return len(r2.runningKeys()) == len(want) }, 20*time.Second, 10*time.Millisecond)
	require.Equal(t, want, r2.runningKeys())
	require.NoError(t, n.RemoveWorker(ctx, w1), "removing it again is a no-op")
	s, err := n.Stats(ctx)
	require.NoError(t, err)
	require.Len(t, s.Workers, 1)
	assert.Equal(t, w2.ID(), s.Workers[0].ID)
	assert.Equal(t, len(want), s.Workers[0].Jobs)
}

// A schedule on a pool of several shards starts its keys in their shards,
// stops the ones it drops (StopOthers reads its notes in every shard), and
// Unschedule removes it from every shard.
func TestScheduleOnShardedPool(t *testing.T) {
	t.Parallel()
	ctx := testCtx(t, 60*time.Second)
	pool := redistest.Name(t)
	r := newRecorder()
	n := addNode(t, srv.NewClient(), pool, WithShards(3))
	addWorkers(t, n, r, 2)
	p := &producer{name: "fleet"}
	p.set(&JobPlan{Jobs: jobsOf("v1", "a", "b", "c", "d", "e", "f", "g", "h"), StopOthers: true}, nil)
	require.NoError(t, n.Schedule(ctx, p, 20*time.Millisecond))
	waitPlans(t, n, p, 1)
	require.Eventually(t, func() bool { return len(r.runningKeys()) == 8 }, 10*time.Second, 10*time.Millisecond)
	per := shardJobs(t, ctx, pool, 3)
	for i, c := range per {
		assert.Positive(t, c, "shard %d", i)
	}

	p.set(&JobPlan{Jobs: jobsOf("v1", "a", "b"), StopOthers: true}, nil)
	waitPlans(t, n, p, 2)
	require.Eventually(t, func() bool { return len(r.runningKeys()) == 2 }, 10*time.Second, 10*time.Millisecond)
	assert.Equal(t, map[string]int{"a": 1, "b": 1}, r.runningKeys())
	for k, c := range r.starts {
		assert.Equal(t, 1, c, "key %s started more than once", k)
	}

	require.NoError(t, n.Unschedule(ctx, "fleet"))
	for i := range 3 {
		lay, err := newLayout(shardName(pool, i))
		require.NoError(t, err)
		left, err := srv.Client().Exists(ctx, lay.plan("fleet"), lay.planKeys("fleet")).Result()
		require.NoError(t, err)
		assert.Zero(t, left, "shard %d keeps the schedule", i)
	}
	err := n.Unschedule(ctx, "fleet")
	require.True(t, errors.Is(err, ErrNoSchedule), "%v", err)
}

// A key's shard and its worker in the shard are picked by independent
// hashes: in every shard, the keys spread over the workers' slots (with
// one hash, every key of shard 0 of 3 would go to slot 0 of 2).
func TestShardAndWorkerHashesAreIndependent(t *testing.T) {
	const shards, slots, keys = 3, 2, 6000
	var count [shards][slots]int
	for i := range keys {
		k := keyN(i)
		tb := table{slots: map[int]string{0: "a", 1: "b"}, size: slots}
		slot := 0
		if tb.owner(k) == "b" {
			slot = 1
		}
		count[shardOfKey(k, shards)][slot]++
	}
	for s := range shards {
		total := count[s][0] + count[s][1]
		assert.InDelta(t, 0.5, float64(count[s][0])/float64(total), 0.05, "shard %d: %v", s, count[s])
	}
}

// A client whose connection pool cannot hold a node's blocking reads in
// every shard is refused at once, with what to do, and the node leaves
// nothing behind.
func TestShardedNodeNeedsRoomInItsClient(t *testing.T) {
	t.Parallel()
	ctx := testCtx(t, 30*time.Second)
	pool := redistest.Name(t)
	addNode(t, srv.NewClient(), pool, WithShards(4))
	small := redis.NewClient(&redis.Options{Addr: srv.Addr(), PoolSize: 10, ContextTimeoutEnabled: true,
		MaintNotificationsConfig: &maintnotifications.Config{Mode: maintnotifications.ModeDisabled}})
	t.Cleanup(func() { _ = small.Close() })
	_, err := AddNode(ctx, small, pool, fastOpts()...)
	require.ErrorIs(t, err, ErrInvalidOption)
	assert.Contains(t, err.Error(), "PoolSize 10 is below the 14 connections a full node of 4 shards needs")
	c, err := AddNode(ctx, small, pool, fastOpts(WithClientOnly())...)
	require.NoError(t, err, "a client-only node needs one read per shard")
	require.NoError(t, c.Close(ctx))
	s, err := Inspect(ctx, srv.Client(), pool)
	require.NoError(t, err)
	assert.Len(t, s.Nodes, 1, "the refused nodes left nothing")
}

// Shutdown of a pool of several shards sets the flag in every shard
// before anything stops: the node's own watcher of shard 0 used to stop
// every shard at the first flag, and the next one failed ("map closed").
func TestShardedShutdownSetsEveryFlag(t *testing.T) {
	t.Parallel()
	ctx := testCtx(t, 60*time.Second)
	for i := range 3 {
		pool := fmt.Sprintf("%s-%d", redistest.Name(t), i)
		n, err := AddNode(ctx, srv.NewClient(), pool, fastOpts(WithShards(4))...)
		require.NoError(t, err)
		// Time for the node's own watchers to see shard 0's flag before
		// the next is set, as on a loaded machine.
		n.test.flagSet = func(shard int) {
			if shard == 0 {
				time.Sleep(100 * time.Millisecond)
			}
		}
		other, err := AddNode(ctx, srv.NewClient(), pool, fastOpts()...)
		require.NoError(t, err)
		require.NoError(t, n.Shutdown(ctx), "round %d", i)
		select {
		case <-other.Done():
		case <-ctx.Done():
			t.Fatal("the other node did not stop")
		}
		for s := range 4 {
			left, err := srv.Client().Keys(ctx, "*{"+shardName(pool, s)+"}*").Result()
			require.NoError(t, err)
			assert.Empty(t, left, "round %d, shard %d", i, s)
		}
	}
}

// Summary and ScanJobs read every shard: Summary adds them up as Stats
// does, and following ScanJobs' cursors from "" lists every job of every
// shard once.
func TestShardedSummaryAndScanJobs(t *testing.T) {
	t.Parallel()
	ctx := testCtx(t, 60*time.Second)
	pool := redistest.Name(t)
	r := newRecorder()
	n := addNode(t, srv.NewClient(), pool, WithShards(3))
	addWorkers(t, n, r, 2)
	const jobs = 60
	for i := range jobs {
		require.NoError(t, n.DispatchJob(ctx, keyN(i), []byte("p")))
	}
	for _, read := range []func() (*Stats, error){
		func() (*Stats, error) { return n.Summary(ctx) },
		func() (*Stats, error) { return Summary(ctx, srv.Client(), pool) },
	} {
		s, err := read()
		require.NoError(t, err)
		assert.Equal(t, 3, s.Shards)
		assert.Equal(t, jobs, s.Jobs)
		assert.Equal(t, jobs, s.Running)
		require.Len(t, s.Workers, 2)
		assert.Equal(t, jobs, s.Workers[0].Jobs+s.Workers[1].Jobs)
	}

	seen := map[string]int{}
	cursor, pages, shardsSeen := "", 0, map[string]bool{}
	for {
		page, err := ScanJobs(ctx, srv.Client(), pool, JobScan{Cursor: cursor, Count: 7})
		require.NoError(t, err)
		for _, j := range page.Jobs {
			seen[j.Key]++
			assert.Equal(t, JobRunning, j.State, j.Key)
		}
		pages++
		if page.Next == "" {
			break
		}
		head, _, ok := strings.Cut(page.Next, "-")
		require.True(t, ok, "a sharded cursor names its shard: %q", page.Next)
		shardsSeen[head] = true
		cursor = page.Next
		require.Less(t, pages, 100, "the scan does not end")
	}
	require.Len(t, seen, jobs)
	for k, c := range seen {
		assert.Equal(t, 1, c, "key %s listed %d times", k, c)
	}
	assert.Len(t, shardsSeen, 3, "the cursors went through every shard: %v", shardsSeen)
	for _, bad := range []string{"3-0", "x", "1", "1-", "-1-5", "01-5"} {
		_, err := ScanJobs(ctx, srv.Client(), pool, JobScan{Cursor: bad})
		assert.ErrorIs(t, err, ErrInvalidOption, "cursor %q", bad)
	}
}

// mergeStats adds up snapshots read from the workers' reports (Summary of
// a large pool): sampled if any shard was, the orphans counted in all.
func TestMergeStatsOfSampledShards(t *testing.T) {
	a := &Stats{Jobs: 3000, Running: 2990, Sampled: true, OrphanJobs: 4, Orphans: []string{"b"},
		Workers: []WorkerStats{{ID: "w1", Jobs: 2990, Keys: []string{"k1"}, Healthy: true}}}
	b := &Stats{Jobs: 10, Running: 10, OrphanJobs: 1, Orphans: []string{"a"},
		Workers: []WorkerStats{{ID: "w1", Jobs: 10, Keys: []string{"k0"}, Healthy: true}}}
	st := mergeStats([]*Stats{a, b})
	assert.True(t, st.Sampled)
	assert.Equal(t, 3010, st.Jobs)
	assert.Equal(t, 3000, st.Running)
	assert.Equal(t, 5, st.OrphanJobs)
	assert.Equal(t, []string{"a", "b"}, st.Orphans)
	require.Len(t, st.Workers, 1)
	assert.Equal(t, 3000, st.Workers[0].Jobs)
	assert.Equal(t, []string{"k0", "k1"}, st.Workers[0].Keys)
	assert.Equal(t, 1, st.WorkersBusy)
	assert.Equal(t, []string{"b"}, a.Orphans, "the parts are left as they were")
}

// A first node refused for its client's PoolSize writes nothing: the
// pool's shard count is not fixed by a node that never joined.
func TestRefusedFirstNodeFixesNoShardCount(t *testing.T) {
	t.Parallel()
	ctx := testCtx(t, 30*time.Second)
	pool := redistest.Name(t)
	small := redis.NewClient(&redis.Options{Addr: srv.Addr(), PoolSize: 10, ContextTimeoutEnabled: true,
		MaintNotificationsConfig: &maintnotifications.Config{Mode: maintnotifications.ModeDisabled}})
	t.Cleanup(func() { _ = small.Close() })
	_, err := AddNode(ctx, small, pool, fastOpts(WithShards(16))...)
	require.ErrorIs(t, err, ErrInvalidOption)
	ok, err := Exists(ctx, srv.Client(), pool)
	require.NoError(t, err)
	assert.False(t, ok, "the refused node left the pool behind")
	n := addNode(t, srv.NewClient(), pool, WithShards(2))
	assert.Len(t, n.parts, 2)
}

// A Redis that restarts empty loses the shard count with the rest: the
// node stores it again as it rejoins, so that a node joining later does
// not take the pool for one of a single shard.
func TestShardCountSurvivesARedisThatLostItsState(t *testing.T) {
	t.Parallel()
	s := redistest.Start(t)
	pool := redistest.Name(t)
	n := addNode(t, s.NewClient(), pool, WithShards(3))
	addWorkers(t, n, newRecorder(), 1)
	require.NoError(t, s.Kill())
	require.NoError(t, s.Restart())
	ctx := testCtx(t, 30*time.Second)
	lay, err := newLayout(pool)
	require.NoError(t, err)
	require.Eventually(t, func() bool {
		v, err := s.Client().HGet(ctx, lay.settings, settingShards).Result()
		return err == nil && v == "3"
	}, 20*time.Second, 50*time.Millisecond, "the shard count is stored again")
	late := addNode(t, s.NewClient(), pool)
	assert.Len(t, late.parts, 3, "a node joining after the loss adopts the pool's count")
}

// A sharded pool whose every shard holds more than summaryExactJobs is
// summed from its workers' reports, shard by shard: the counts add up to
// what an exact Inspect counts, per worker too, and the snapshot says it
// was sampled.
func TestShardedSummaryOfALargePool(t *testing.T) {
	t.Parallel()
	ctx := testCtx(t, 2*time.Minute)
	pool := redistest.Name(t)
	n := addNode(t, srv.NewClient(), pool, WithShards(3), WithWorkerTTL(time.Second))
	addWorkers(t, n, nopHandler{}, 2)
	const jobs = 7500 // about 2,500 a shard
	dispatchMany(t, ctx, n, jobs, 32)
	for i, c := range shardJobs(t, ctx, pool, 3) {
		require.Greater(t, c, int64(summaryExactJobs), "shard %d holds few enough jobs to be read exactly", i)
	}
	exact, err := Inspect(ctx, srv.Client(), pool)
	require.NoError(t, err)
	require.Equal(t, jobs, exact.Running)
	require.Eventually(t, func() bool {
		s, err := Summary(ctx, srv.Client(), pool)
		return err == nil && s.Running == jobs
	}, 30*time.Second, 20*time.Millisecond, "the workers report their jobs")
	s, err := Summary(ctx, srv.Client(), pool)
	require.NoError(t, err)
	assert.True(t, s.Sampled)
	assert.Equal(t, 3, s.Shards)
	assert.Equal(t, jobs, s.Jobs)
	assert.Zero(t, s.OrphanJobs)
	require.Len(t, s.Workers, len(exact.Workers))
	for i, w := range exact.Workers {
		assert.Equal(t, w.ID, s.Workers[i].ID)
		assert.Equal(t, w.Jobs, s.Workers[i].Jobs, w.ID)
	}
}

// dispatchMany dispatches keys key-0 … key-(jobs-1) from producers
// goroutines.
func dispatchMany(t *testing.T, ctx context.Context, n *Node, jobs, producers int) {
	t.Helper()
	errs := make(chan error, producers)
	for p := range producers {
		go func() {
			var err error
			for i := p; i < jobs && err == nil; i += producers {
				err = n.DispatchJob(ctx, keyN(i), nil)
			}
			errs <- err
		}()
	}
	for range producers {
		require.NoError(t, <-errs)
	}
}
