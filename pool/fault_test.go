package pool

import (
	"context"
	"log/slog"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/shepherd-go/shepherd/internal/redistest"
	"github.com/shepherd-go/shepherd/internal/testlog"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestCrashedNodesJobsRestartWithinTTL(t *testing.T) {
	t.Parallel()
	pool := redistest.Name(t)
	const ttl = time.Second
	survivor := addNode(t, srv.Client(), pool)
	victim := addNode(t, srv.NewClient(), pool)
	rs, rv := newRecorder(), newRecorder()
	addWorkers(t, survivor, rs, 2)
	addWorkers(t, victim, rv, 2)
	const jobs = 60 // enough to spread; few, so the bound measures detection, not machine load
	dispatchN(t, survivor, jobs)
	victimKeys := rv.runningKeys()
	require.NotEmpty(t, victimKeys)
	survivorBefore := rs.runningKeys()

	crashed := time.Now()
	victim.crash()
	require.Eventually(t, func() bool {
		running := rs.runningKeys()
		for k := range victimKeys {
			if running[k] != 1 {
				return false
			}
		}
		return true
	}, ttl+5*time.Second, 10*time.Millisecond, "the dead node's jobs did not restart on the survivor")
	recovery := time.Since(crashed)
	t.Logf("the crashed node's %d jobs restarted after %v (WorkerTTL %v)", len(victimKeys), recovery, ttl)
	// The keep-alive may be up to TTL/3 old at the crash.
	assert.Less(t, recovery, ttl+time.Second, "restart within WorkerTTL + 1s of the last keep-alive")

	rs.mu.Lock()
	for k := range survivorBefore {
		assert.Equal(t, 1, rs.starts[k], "survivor job %s was restarted needlessly", k)
	}
	rs.mu.Unlock()
	assert.Len(t, rs.runningKeys(), jobs, "every job runs on the survivor, once")
}

func TestFrozenWorkerStopsItsStaleJobsAndRejoins(t *testing.T) {
	t.Parallel()
	pool := redistest.Name(t)
	// What the nodes logged, shown when the test fails.
	var logs testlog.Buffer
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("the nodes' logs:\n%s", logs.String())
		}
	})
	logger := slog.New(slog.NewTextHandler(&logs, &slog.HandlerOptions{Level: slog.LevelDebug}))
	a := addNode(t, srv.Client(), pool, WithLogger(logger.With("node", "a")))
	b := addNode(t, srv.NewClient(), pool, WithLogger(logger.With("node", "b")))
	ra, rb := newRecorder(), newRecorder()
	addWorkers(t, a, ra, 1)
	addWorkers(t, b, rb, 1)
	dispatchN(t, a, 100)
	frozenKeys := rb.runningKeys()
	require.NotEmpty(t, frozenKeys)

	// Freeze b's keep-alives past WorkerTTL, as a GC pause or SIGSTOP would.
	b.pauseKeepAlive(true)
	require.Eventually(t, func() bool {
		running := ra.runningKeys()
		for k := range frozenKeys {
			if running[k] != 1 {
				return false
			}
		}
		return true
	}, 10*time.Second, 10*time.Millisecond, "the frozen worker's jobs did not move")
	frozenAt := time.Now()
	b.pauseKeepAlive(false)

	// Revived, b learns it was declared dead and stops its stale copies.
	require.Eventually(t, func() bool {
		running := rb.runningKeys()
		for k := range frozenKeys {
			if running[k] > 0 {
				return false
			}
		}
		return true
	}, 10*time.Second, 10*time.Millisecond, "the revived worker kept its stale jobs")
	t.Logf("stale copies stopped %v after keep-alives resumed", time.Since(frozenAt))
	// It rejoins, and eventually every job runs exactly once across both.
	require.Eventually(t, func() bool {
		st, err := a.Stats(testCtx(t, 5*time.Second))
		return err == nil && len(st.Workers) == 2
	}, 10*time.Second, 20*time.Millisecond, "the revived worker did not rejoin")
	p := settled(t, []*recorder{ra, rb}, 100)
	moved := 0
	for _, w := range p {
		moved += w
	}
	assert.Greater(t, moved, 0, "the rejoined worker gets a share again")
}

func TestRedisRestartWithAOFLosesNoJob(t *testing.T) {
	t.Parallel()
	s := redistest.Start(t, redistest.WithAOF())
	pool := redistest.Name(t)
	n1 := addNode(t, s.NewClient(), pool)
	n2 := addNode(t, s.NewClient(), pool)
	r1, r2 := newRecorder(), newRecorder()
	addWorkers(t, n1, r1, 2)
	addWorkers(t, n2, r2, 2)
	dispatchN(t, n1, 100)

	require.NoError(t, s.Kill())
	require.NoError(t, s.Restart())

	ctx := testCtx(t, 30*time.Second)
	keys, err := n1.JobKeys(ctx)
	require.NoError(t, err)
	assert.Len(t, keys, 100, "every acknowledged job survived the restart")
	settled(t, []*recorder{r1, r2}, 100)
	// New work flows after the restart.
	require.Eventually(t, func() bool {
		return n2.DispatchJob(ctx, "after-restart", nil) == nil
	}, 20*time.Second, 100*time.Millisecond)
	assert.Equal(t, 1, union(r1, r2)["after-restart"])
}

func TestRedisRestartWithoutPersistenceRecovers(t *testing.T) {
	t.Parallel()
	s := redistest.Start(t)
	pool := redistest.Name(t)
	n := addNode(t, s.NewClient(), pool)
	rec := newRecorder()
	addWorkers(t, n, rec, 2)
	dispatchN(t, n, 20)

	require.NoError(t, s.Kill())
	require.NoError(t, s.Restart())
	ctx := testCtx(t, 30*time.Second)
	// Redis lost everything; the workers rejoin and new dispatches work.
	require.Eventually(t, func() bool {
		dctx, cancel := context.WithTimeout(ctx, 2*time.Second)
		defer cancel()
		return n.DispatchJob(dctx, "fresh", nil) == nil
	}, 20*time.Second, 100*time.Millisecond)
	st, err := n.Stats(ctx)
	require.NoError(t, err)
	assert.Len(t, st.Workers, 2, "both workers re-registered")
}

// A worker that dies during Start must not leave DispatchJob waiting
// forever: the start that takes over answers it.
func TestDispatchAnsweredWhenTheWorkerDiesDuringStart(t *testing.T) {
	t.Parallel()
	pool := redistest.Name(t)
	client := addNode(t, srv.NewClient(), pool, WithClientOnly())
	doomed := addNode(t, srv.NewClient(), pool)
	slow := newRecorder()
	slow.startDelay = 500 * time.Millisecond
	addWorkers(t, doomed, slow, 1)

	done := make(chan error, 1)
	go func() { done <- client.DispatchJob(testCtx(t, 30*time.Second), "k", []byte("v")) }()
	require.Eventually(t, func() bool {
		return recordState(context.Background(), client, "k") == stateClaimed
	}, 10*time.Second, 5*time.Millisecond, "Start never began")
	go doomed.crash()

	takeOver(t, pool, "k", done)
}

// takeOver adds a node with one worker to pool, for the jobs of a node
// that just died, and waits for the DispatchJob done answers (nil: the
// job runs) and for key to run on the new worker.
func takeOver(t *testing.T, pool, key string, done <-chan error) {
	t.Helper()
	survivor := addNode(t, srv.NewClient(), pool)
	rec := newRecorder()
	addWorkers(t, survivor, rec, 1)
	select {
	case err := <-done:
		require.NoError(t, err)
	case <-time.After(20 * time.Second):
		t.Fatal("DispatchJob still waits after its worker died")
	}
	require.Eventually(t, func() bool { return rec.runningKeys()[key] == 1 }, 10*time.Second, 10*time.Millisecond)
}

// A DispatchJob whose ctx ends while Redis hangs returns with its ctx, not
// after the withdrawal's own timeout.
func TestDispatchReturnsWithItsCtxWhileRedisHangs(t *testing.T) {
	t.Parallel()
	s := redistest.Start(t)
	// A client that honours ctx deadlines on socket reads, as users are
	// told to build theirs: the admission's reply may still be on its way
	// when Redis freezes.
	n := addNode(t, timedClient(t, s), redistest.Name(t)) // no worker: the job waits
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	done := make(chan error, 1)
	go func() { done <- n.DispatchJob(ctx, "k", nil) }()
	require.Eventually(t, func() bool {
		l, err := s.Client().XLen(context.Background(), n.lay.jobStream).Result()
		return err == nil && l == 1
	}, 5*time.Second, 5*time.Millisecond, "the job was never admitted")
	require.NoError(t, s.Freeze())
	defer func() { require.NoError(t, s.Thaw()) }()
	select {
	case err := <-done:
		require.ErrorIs(t, err, context.DeadlineExceeded)
	case <-time.After(3 * time.Second):
		t.Fatalf("DispatchJob outlived its ctx by seconds while Redis hung; goroutines:\n%s", goroutines("DispatchJob"))
	}
}

// goroutines returns the stacks of the goroutines that mention fn, to say
// where a call that should have returned is stuck.
func goroutines(fn string) string {
	buf := make([]byte, 1<<22)
	buf = buf[:runtime.Stack(buf, true)]
	var out []string
	for _, g := range strings.Split(string(buf), "\n\n") {
		if strings.Contains(g, fn) {
			out = append(out, g)
		}
	}
	return strings.Join(out, "\n\n")
}

// slowFirstStart keeps its running jobs as a set, as real handlers do (a
// Stop removes the key, whatever started it), is slow on a job's first
// attempt only, longer than PendingJobTTL, so the job is requeued (to the
// same, only worker) while the first Start still runs, and its Stop takes
// a while.
type slowFirstStart struct {
	mu      sync.Mutex
	running map[string]bool
	starts  int
	stops   int
}

func (s *slowFirstStart) Start(ctx context.Context, job *Job) error {
	if job.Attempt == 1 {
		time.Sleep(1500 * time.Millisecond) // ignores ctx, as a careless handler does
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.running[job.Key] = true
	s.starts++
	return nil
}

func (s *slowFirstStart) Stop(ctx context.Context, key string) error {
	time.Sleep(300 * time.Millisecond)
	s.mu.Lock()
	defer s.mu.Unlock()
	delete(s.running, key)
	s.stops++
	return nil
}

// Found by the chaos suite: the stale first start was stopped with an
// expired ctx, that Stop was left running, and it then removed the job the
// second start had just started on the same worker.
func TestSlowStartRequeuedToTheSameWorkerEndsRunningOnce(t *testing.T) {
	t.Parallel()
	n := addNode(t, srv.Client(), redistest.Name(t), WithPendingJobTTL(500*time.Millisecond))
	h := &slowFirstStart{running: map[string]bool{}}
	addWorkers(t, n, h, 1)
	require.NoError(t, n.DispatchJob(testCtx(t, 20*time.Second), "slow", nil))
	// Both starts and the stale copy's Stop have happened...
	require.Eventually(t, func() bool {
		h.mu.Lock()
		defer h.mu.Unlock()
		return h.starts == 2 && h.stops == 1
	}, 10*time.Second, 10*time.Millisecond)
	// ...and the job runs, as its record says.
	h.mu.Lock()
	assert.True(t, h.running["slow"], "the job's second start was undone by the first one's Stop")
	h.mu.Unlock()
	assert.Equal(t, stateRunning, recordState(context.Background(), n, "slow"))
}
