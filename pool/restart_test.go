package pool

import (
	"errors"
	"maps"
	"slices"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/shepherd-go/shepherd/internal/redistest"
	"github.com/shepherd-go/shepherd/streaming"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// stableOpts are the options of a node with a stable identity.
func stableOpts(id string, grace time.Duration) []NodeOption {
	return []NodeOption{WithNodeID(id), WithRestartGrace(grace)}
}

// workerIDs returns the ids of ws.
func workerIDs(ws []*Worker) []string {
	ids := make([]string, len(ws))
	for i, w := range ws {
		ids[i] = w.ID()
	}
	return ids
}

// ownersOf returns, per key, the worker the job's record names.
func ownersOf(t *testing.T, n *Node, keys map[string]int) map[string]string {
	t.Helper()
	out := map[string]string{}
	for k := range keys {
		info, err := n.Job(testCtx(t, 5*time.Second), k)
		require.NoError(t, err)
		out[k] = info.Worker
	}
	return out
}

// A node with a stable identity that closes and comes back within the
// grace gets its jobs back on the same workers: each starts once more
// there, and no other worker starts any of them meanwhile, though the
// gap lasts longer than WorkerTTL.
func TestRestartWithinGraceStartsEachJobOnceMoreOnTheSameWorker(t *testing.T) {
	t.Parallel()
	testRestartWithinGrace(t)
}

// The same on a pool of several shards: the node's part in every shard
// keeps its place and gets its jobs back.
func TestShardedRestartWithinGrace(t *testing.T) {
	t.Parallel()
	testRestartWithinGrace(t, WithShards(3))
}

func testRestartWithinGrace(t *testing.T, more ...NodeOption) {
	ctx := testCtx(t, time.Minute)
	pool := redistest.Name(t)
	other := addNode(t, srv.NewClient(), pool, more...)
	ro := newRecorder()
	addWorkers(t, other, ro, 2)
	opts := stableOpts("restarting", 30*time.Second)
	first := addNode(t, srv.NewClient(), pool, opts...)
	r1 := newRecorder()
	ids := workerIDs(addWorkers(t, first, r1, 2))
	const jobs = 60
	dispatchN(t, other, jobs)
	mine := r1.runningKeys()
	require.NotEmpty(t, mine)
	owners := ownersOf(t, other, mine)
	otherStarts := map[string]int{}
	ro.mu.Lock()
	maps.Copy(otherStarts, ro.starts)
	ro.mu.Unlock()

	require.NoError(t, first.Close(ctx))
	assert.Empty(t, r1.runningKeys(), "Close stops the node's jobs")
	// Longer than WorkerTTL (1s) and the janitor's passes: nothing moves.
	assert.Never(t, func() bool {
		for k := range ro.runningKeys() {
			if mine[k] > 0 {
				return true
			}
		}
		return false
	}, 2*time.Second, 20*time.Millisecond, "a job of the restarting node started elsewhere")
	// Inspection says they wait for their node, not that they are stuck.
	st, err := other.Stats(ctx)
	require.NoError(t, err)
	assert.Empty(t, st.Orphans, "a restarting node's jobs are not orphans")
	restarting := 0
	for _, ws := range st.Workers {
		if slices.Contains(ids, ws.ID) {
			assert.False(t, ws.Healthy)
			assert.True(t, ws.RestartingUntil.After(st.Time), "worker %s: restarting until %v", ws.ID, ws.RestartingUntil)
			restarting++
		} else {
			assert.True(t, ws.RestartingUntil.IsZero())
		}
	}
	assert.Equal(t, 2, restarting)

	second := addNode(t, srv.NewClient(), pool, opts...)
	r2 := newRecorder()
	assert.Equal(t, ids, workerIDs(addWorkers(t, second, r2, 2)), "the workers get their ids back")
	assert.EqualValues(t, max(1, second.cfg.shards), second.test.reclaimWalks.Load(),
		"the workers share one walk through each shard's records")
	require.Eventually(t, func() bool { return maps.Equal(r2.runningKeys(), mine) }, 10*time.Second, 10*time.Millisecond,
		"the restarted node runs its jobs again")
	r2.mu.Lock()
	for k := range mine {
		assert.Equal(t, 1, r2.starts[k], "job %s started once more", k)
	}
	r2.mu.Unlock()
	ro.mu.Lock()
	assert.Equal(t, otherStarts, ro.starts, "the other node started nothing more")
	ro.mu.Unlock()
	assert.Equal(t, owners, ownersOf(t, other, mine), "every job is back on the same worker id")
	assert.Len(t, union(ro, r2), jobs)
}

// Past the grace, a closed node's jobs move as a dead worker's do, and
// the node that comes back later takes its share back as any joiner.
func TestRestartPastGraceMovesTheJobs(t *testing.T) {
	t.Parallel()
	ctx := testCtx(t, time.Minute)
	pool := redistest.Name(t)
	other := addNode(t, srv.Client(), pool)
	ro := newRecorder()
	addWorkers(t, other, ro, 2)
	opts := stableOpts("late", 500*time.Millisecond)
	first := addNode(t, srv.NewClient(), pool, opts...)
	r1 := newRecorder()
	ids := workerIDs(addWorkers(t, first, r1, 2))
	const jobs = 40
	dispatchN(t, other, jobs)
	mine := r1.runningKeys()
	require.NotEmpty(t, mine)

	closed := time.Now()
	require.NoError(t, first.Close(ctx))
	require.Eventually(t, func() bool { return len(ro.runningKeys()) == jobs }, 10*time.Second, 10*time.Millisecond,
		"the jobs move once the grace has passed")
	moved := time.Since(closed)
	assert.Greater(t, moved, 500*time.Millisecond, "not before the grace")
	t.Logf("moved %v after Close (grace 500ms)", moved)

	second := addNode(t, srv.NewClient(), pool, opts...)
	r2 := newRecorder()
	assert.Equal(t, ids, workerIDs(addWorkers(t, second, r2, 2)))
	require.Eventually(t, func() bool {
		u := union(ro, r2)
		if len(u) != jobs || len(r2.runningKeys()) == 0 {
			return false
		}
		for _, v := range u {
			if v != 1 {
				return false
			}
		}
		return true
	}, 10*time.Second, 10*time.Millisecond, "a share of the jobs moves back to the node, each running once")
}

// Leave takes a node with a stable identity out for good: its jobs move
// at once, and its id is free.
func TestLeaveMovesAStableNodesJobsAtOnce(t *testing.T) {
	t.Parallel()
	ctx := testCtx(t, time.Minute)
	pool := redistest.Name(t)
	other := addNode(t, srv.Client(), pool)
	ro := newRecorder()
	addWorkers(t, other, ro, 1)
	n := addNode(t, srv.NewClient(), pool, stableOpts("leaver", time.Hour)...)
	addWorkers(t, n, newRecorder(), 2)
	const jobs = 20
	dispatchN(t, other, jobs)
	require.NoError(t, n.Leave(ctx))
	require.Eventually(t, func() bool { return len(ro.runningKeys()) == jobs }, 5*time.Second, 10*time.Millisecond,
		"Leave hands the jobs over at once (the grace is an hour)")
	held, err := srv.Client().HExists(ctx, n.lay.nodeIDs, "leaver").Result()
	require.NoError(t, err)
	assert.False(t, held, "Leave releases the id")
}

// addNodeWhenFree adds a node with a stable id to pool, retrying while
// the id is in use, for up to 10s.
func addNodeWhenFree(t *testing.T, pool string, opts ...NodeOption) *Node {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		n, err := AddNode(testCtx(t, 5*time.Second), srv.NewClient(), pool, fastOpts(opts...)...)
		if errors.Is(err, ErrNodeIDInUse) && time.Now().Before(deadline) {
			time.Sleep(50 * time.Millisecond) // retry backoff
			continue
		}
		require.NoError(t, err)
		t.Cleanup(func() { _ = closeNodeWithin(n) })
		return n
	}
}

// A second live process with the same id is refused; once the first has
// closed, the id is free again.
func TestNodeIDInUse(t *testing.T) {
	t.Parallel()
	ctx := testCtx(t, 30*time.Second)
	pool := redistest.Name(t)
	first := addNode(t, srv.Client(), pool, WithNodeID("dup"))
	_, err := AddNode(ctx, srv.NewClient(), pool, fastOpts(WithNodeID("dup"))...)
	require.ErrorIs(t, err, ErrNodeIDInUse)
	assert.Contains(t, err.Error(), first.ID(), "the error names the holder")
	other := addNode(t, srv.NewClient(), pool, WithNodeID("other"))
	assert.NotEqual(t, first.ID(), other.ID())

	require.NoError(t, first.Close(ctx))
	again := addNode(t, srv.NewClient(), pool, WithNodeID("dup"))
	assert.NotEqual(t, first.ID(), again.ID(), "a node's id is new at every AddNode")
}

func TestNodeIDOptionsAreChecked(t *testing.T) {
	t.Parallel()
	ctx := testCtx(t, 10*time.Second)
	pool := redistest.Name(t)
	for name, opts := range map[string][]NodeOption{
		"grace without id":  {WithRestartGrace(time.Second)},
		"empty id":          {WithNodeID("")},
		"space in id":       {WithNodeID("a b")},
		"brace in id":       {WithNodeID("a}")},
		"long id":           {WithNodeID(string(slices.Repeat([]byte("x"), maxNodeIDSize+1)))},
		"zero grace":        {WithNodeID("a"), WithRestartGrace(0)},
		"client-only w/ id": {WithNodeID("a"), WithClientOnly()},
	} {
		_, err := AddNode(ctx, srv.Client(), pool, opts...)
		assert.ErrorIs(t, err, ErrInvalidOption, name)
	}
}

// A stable node's n-th worker has the same id at every restart, and a
// removed worker's index is taken again by the next AddWorker.
func TestStableWorkerIDs(t *testing.T) {
	t.Parallel()
	pool := redistest.Name(t)
	n := addNode(t, srv.Client(), pool, WithNodeID("ids"))
	ws := addWorkers(t, n, newRecorder(), 3)
	for i, w := range ws {
		assert.Equal(t, stableWorkerID(pool, "ids", i), w.ID())
		assert.Len(t, w.ID(), 16, "hex, as random ids")
	}
	require.NoError(t, n.RemoveWorker(testCtx(t, 10*time.Second), ws[1]))
	w := addWorkers(t, n, newRecorder(), 1)[0]
	assert.Equal(t, ws[1].ID(), w.ID())
	assert.NotEqual(t, stableWorkerID(pool, "ids", 0), stableWorkerID(pool+"x", "ids", 0), "ids differ across pools")
}

// A stable node cut off past WorkerTTL loses its id to a restarted
// process, which takes its workers and jobs over; when the old one comes
// back, its workers are told they are dead (their entries name the new
// node), stop their stale copies and stay out, and no job runs twice.
func TestATakenOverNodeDropsItsJobs(t *testing.T) {
	t.Parallel()
	pool := redistest.Name(t)
	other := addNode(t, srv.Client(), pool)
	addWorkers(t, other, newRecorder(), 1)
	opts := stableOpts("zombie", 30*time.Second)
	old := addNode(t, srv.NewClient(), pool, opts...)
	rOld := newRecorder()
	addWorkers(t, old, rOld, 2)
	dispatchN(t, other, 30)
	mine := rOld.runningKeys()
	require.NotEmpty(t, mine)

	old.pauseKeepAlive(true)
	successor := addNodeWhenFree(t, pool, opts...)
	rNew := newRecorder()
	addWorkers(t, successor, rNew, 2)
	old.pauseKeepAlive(false)
	require.Eventually(t, func() bool {
		return maps.Equal(rNew.runningKeys(), mine) && len(rOld.runningKeys()) == 0
	}, 15*time.Second, 20*time.Millisecond, "the successor runs the jobs, the old node none")
	require.Eventually(t, func() bool {
		old.mu.Lock()
		defer old.mu.Unlock()
		return len(old.myWorkers) == 0
	}, 5*time.Second, 10*time.Millisecond, "the old node's workers retire")
	assert.Never(t, func() bool { return len(rOld.runningKeys()) > 0 }, time.Second, 20*time.Millisecond,
		"the old node starts nothing again")
	_, err := old.AddWorker(testCtx(t, 5*time.Second), newRecorder())
	assert.ErrorIs(t, err, ErrNodeIDInUse, "the old node cannot take the id back")
}

// A node whose id was taken over while it was cut off still reads its
// former workers' streams until its next keep-alive tells it: what it
// reads there, it must leave for its successor (it used to delete it, so
// that a stop the successor had not read yet was lost).
func TestATakenOverNodeLeavesItsSuccessorsEvents(t *testing.T) {
	t.Parallel()
	ctx := testCtx(t, time.Minute)
	pool := redistest.Name(t)
	opts := stableOpts("shared", 30*time.Second)
	old := addNode(t, srv.NewClient(), pool, opts...)
	w := addWorkers(t, old, newRecorder(), 1)[0]
	old.pauseKeepAlive(true)
	successor := addNodeWhenFree(t, pool, opts...)
	addWorkers(t, successor, newRecorder(), 1)
	// The successor stops reading (as if it were busy), so that only the
	// old node could delete what the test adds to the shared stream.
	successor.crash()

	id, err := srv.Client().XAdd(ctx, &redis.XAddArgs{Stream: w.stream.Key(), Values: []string{"e", "probe"}}).Result()
	require.NoError(t, err)
	old.trimInbox([]*streaming.Event{{Stream: w.stream.Name(), ID: id}})
	entries, err := srv.Client().XRange(ctx, w.stream.Key(), id, id).Result()
	require.NoError(t, err)
	assert.Len(t, entries, 1, "the old node deleted an event its successor had not read")
	old.pauseKeepAlive(false)
}

// DispatchJob and StopJob calls for a restarting node's keys wait for
// it: the dispatched job starts there once it is back, and the stopped
// one never starts again.
func TestCallsDuringARestartWaitForIt(t *testing.T) {
	t.Parallel()
	ctx := testCtx(t, time.Minute)
	pool := redistest.Name(t)
	other := addNode(t, srv.Client(), pool)
	ro := newRecorder()
	addWorkers(t, other, ro, 1)
	opts := stableOpts("callee", 30*time.Second)
	first := addNode(t, srv.NewClient(), pool, opts...)
	ids := workerIDs(addWorkers(t, first, newRecorder(), 2))
	dispatchN(t, other, 30)
	require.NoError(t, first.Close(ctx))

	// A key of the restarting node, not dispatched yet, and one it ran.
	ownedByFirst := func(key string) bool { return slices.Contains(ids, other.table().owner(key)) }
	var fresh, stopped string
	for i := 0; fresh == "" || stopped == ""; i++ {
		switch {
		case i >= 30 && fresh == "" && ownedByFirst(keyN(i)):
			fresh = keyN(i)
		case i < 30 && stopped == "" && ownedByFirst(keyN(i)):
			stopped = keyN(i)
		}
	}
	dispatched := make(chan error, 1)
	go func() { dispatched <- other.DispatchJob(ctx, fresh, []byte("p")) }()
	stopDone := make(chan error, 1)
	go func() { stopDone <- other.StopJob(ctx, stopped) }()
	require.Eventually(t, func() bool {
		a, err1 := other.Job(ctx, fresh)
		b, err2 := other.Job(ctx, stopped)
		return err1 == nil && err2 == nil && a.State == JobRouted && b.State == JobStopping
	}, 5*time.Second, 10*time.Millisecond, "both calls reached the restarting worker's stream")

	second := addNode(t, srv.NewClient(), pool, opts...)
	r2 := newRecorder()
	addWorkers(t, second, r2, 2)
	require.NoError(t, <-dispatched, "the dispatch completes once the node is back")
	require.NoError(t, <-stopDone, "the stop completes once the node is back")
	require.Eventually(t, func() bool { return r2.runningKeys()[fresh] == 1 }, 5*time.Second, 10*time.Millisecond)
	_, err := other.Job(ctx, stopped)
	assert.ErrorIs(t, err, ErrJobNotFound)
	assert.Zero(t, r2.runningKeys()[stopped], "the stopped job does not start again")
	ro.mu.Lock()
	assert.Zero(t, ro.starts[fresh]+ro.starts[stopped], "neither ran elsewhere")
	ro.mu.Unlock()
}

// A former holder of an id that leaves (or shuts its workers down) after
// a restarted process took its workers over leaves their slots, entries
// and streams to the successor.
func TestAFormerHolderLeavingSparesItsSuccessor(t *testing.T) {
	t.Parallel()
	ctx := testCtx(t, time.Minute)
	pool := redistest.Name(t)
	other := addNode(t, srv.Client(), pool)
	ro := newRecorder()
	addWorkers(t, other, ro, 1)
	opts := stableOpts("former", 30*time.Second)
	old := addNode(t, srv.NewClient(), pool, opts...)
	ids := workerIDs(addWorkers(t, old, newRecorder(), 2))
	dispatchN(t, other, 30)

	old.pauseKeepAlive(true)
	successor := addNodeWhenFree(t, pool, opts...)
	rNew := newRecorder()
	addWorkers(t, successor, rNew, 2)
	require.Eventually(t, func() bool { return len(union(ro, rNew)) == 30 }, 10*time.Second, 10*time.Millisecond)
	running := rNew.runningKeys()

	require.NoError(t, old.Leave(ctx)) // before its keep-alive told it anything
	for _, id := range ids {
		_, ok := other.workers.Get(id)
		assert.True(t, ok, "the successor's worker %s is still in the pool", id)
		assert.GreaterOrEqual(t, other.table().slotOf(id), 0, "and holds its slot")
	}
	assert.Never(t, func() bool { return !maps.Equal(rNew.runningKeys(), running) }, 1500*time.Millisecond, 20*time.Millisecond,
		"the successor's jobs stay where they run")
}

// A crashed node with a stable identity keeps its jobs for WorkerTTL +
// the grace, not WorkerTTL: nothing moves meanwhile, and once the grace
// has passed they move as a dead worker's do.
func TestACrashedStableNodeKeepsItsJobsForTheGrace(t *testing.T) {
	t.Parallel()
	pool := redistest.Name(t)
	other := addNode(t, srv.Client(), pool)
	ro := newRecorder()
	addWorkers(t, other, ro, 1)
	crashed := addNode(t, srv.NewClient(), pool, stableOpts("crashed", 2*time.Second)...)
	rc := newRecorder()
	addWorkers(t, crashed, rc, 2)
	const jobs = 30
	dispatchN(t, other, jobs)
	mine := rc.runningKeys()
	require.NotEmpty(t, mine)

	began := time.Now()
	crashed.crash()
	// WorkerTTL (1s) and a few janitor passes: without the grace they
	// would have moved by now.
	assert.Never(t, func() bool { return len(ro.runningKeys()) > jobs-len(mine) }, 1800*time.Millisecond, 20*time.Millisecond,
		"a crashed stable node's job moved within WorkerTTL + the grace")
	require.Eventually(t, func() bool { return len(ro.runningKeys()) == jobs }, 10*time.Second, 10*time.Millisecond,
		"past WorkerTTL + the grace, the jobs move")
	t.Logf("moved %v after the crash (WorkerTTL 1s, grace 2s)", time.Since(began))
	assert.Greater(t, time.Since(began), 2*time.Second)
}

// TestAStopBetweenARestartedNodesWorkersIsAnswered: a restarted node's
// first AddWorker walks the records for all its workers (reclaimable);
// a StopJob of a job of its second worker that comes between the two
// AddWorkers is answered when the second one takes its jobs back, and
// the job does not start again.
func TestAStopBetweenARestartedNodesWorkersIsAnswered(t *testing.T) {
	t.Parallel()
	ctx := testCtx(t, time.Minute)
	pool := redistest.Name(t)
	other := addNode(t, srv.Client(), pool, WithClientOnly())
	opts := stableOpts("between", 30*time.Second)
	first := addNode(t, srv.NewClient(), pool, opts...)
	ids := workerIDs(addWorkers(t, first, newRecorder(), 2))
	dispatchN(t, other, 30)
	var stopped string
	for i := 0; i < 30 && stopped == ""; i++ {
		if info, err := other.Job(ctx, keyN(i)); err == nil && info.Worker == ids[1] {
			stopped = keyN(i)
		}
	}
	require.NotEmpty(t, stopped, "a job of the second worker")
	require.NoError(t, first.Close(ctx))

	second := addNode(t, srv.NewClient(), pool, opts...)
	r2 := newRecorder()
	w0, err := second.AddWorker(ctx, r2)
	require.NoError(t, err)
	require.Equal(t, ids[0], w0.ID())
	stopDone := make(chan error, 1)
	go func() { stopDone <- other.StopJob(ctx, stopped) }()
	require.Eventually(t, func() bool {
		info, err := other.Job(ctx, stopped)
		return err == nil && info.State == JobStopping
	}, 5*time.Second, 10*time.Millisecond, "the stop reached the second worker's stream")
	w1, err := second.AddWorker(ctx, r2)
	require.NoError(t, err)
	require.Equal(t, ids[1], w1.ID())
	select {
	case err := <-stopDone:
		require.NoError(t, err)
	case <-time.After(10 * time.Second):
		t.Fatal("the stop was not answered")
	}
	_, err = other.Job(ctx, stopped)
	assert.ErrorIs(t, err, ErrJobNotFound)
	assert.Never(t, func() bool { return r2.runningKeys()[stopped] > 0 }, 500*time.Millisecond, 20*time.Millisecond,
		"the stopped job does not start again")
	assert.EqualValues(t, 1, second.test.reclaimWalks.Load())
}
