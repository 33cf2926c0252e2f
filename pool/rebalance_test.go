package pool

import (
	"context"
	"testing"
	"time"

	"github.com/shepherd-go/shepherd/internal/redistest"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// perWorkerRecorder gives each worker its own recorder, so tests can see
// which worker runs which key.
func addRecordedWorkers(t *testing.T, n *Node, count int) ([]*Worker, []*recorder) {
	t.Helper()
	var ws []*Worker
	var rs []*recorder
	for i := 0; i < count; i++ {
		r := newRecorder()
		ws = append(ws, addWorkers(t, n, r, 1)...)
		rs = append(rs, r)
	}
	return ws, rs
}

// placement returns key → index of the recorder running it, and fails on a
// key running more than once.
func placement(t *testing.T, rs []*recorder) map[string]int {
	t.Helper()
	out := map[string]int{}
	for i, r := range rs {
		for k, c := range r.runningKeys() {
			require.Equal(t, 1, c, "key %s runs %d times on one worker", k, c)
			_, dup := out[k]
			require.False(t, dup, "key %s runs on two workers", k)
			out[k] = i
		}
	}
	return out
}

// settled waits until exactly want keys run, each once, and the placement
// stops changing.
func settled(t *testing.T, rs []*recorder, want int) map[string]int {
	t.Helper()
	var last map[string]int
	require.Eventually(t, func() bool {
		p := map[string]int{}
		for i, r := range rs {
			for k, c := range r.runningKeys() {
				if c != 1 {
					return false
				}
				if _, dup := p[k]; dup {
					return false
				}
				p[k] = i
			}
		}
		if len(p) != want {
			return false
		}
		same := last != nil && len(last) == len(p)
		for k, v := range p {
			if last[k] != v {
				same = false
			}
		}
		last = p
		return same
	}, 30*time.Second, 100*time.Millisecond)
	return placement(t, rs)
}

func dispatchN(t *testing.T, n *Node, count int) {
	t.Helper()
	ctx := testCtx(t, 60*time.Second)
	errs := make(chan error, count)
	sem := make(chan struct{}, 32)
	for i := 0; i < count; i++ {
		sem <- struct{}{}
		go func(i int) {
			defer func() { <-sem }()
			errs <- n.DispatchJob(ctx, keyN(i), nil)
		}(i)
	}
	for i := 0; i < count; i++ {
		require.NoError(t, <-errs)
	}
}

func TestAddingAWorkerMovesKeysOnlyOntoIt(t *testing.T) {
	t.Parallel()
	n := addNode(t, srv.Client(), redistest.Name(t))
	_, rs := addRecordedWorkers(t, n, 4)
	const jobs = 400
	dispatchN(t, n, jobs)
	before := settled(t, rs, jobs)

	_, newRs := addRecordedWorkers(t, n, 1)
	rs = append(rs, newRs...)
	after := settled(t, rs, jobs)
	moved := 0
	for k, w := range after {
		if before[k] != w {
			moved++
			assert.Equal(t, 4, w, "key %s moved between old workers", k)
		}
	}
	t.Logf("adding a 5th worker moved %d of %d keys (ideal %d)", moved, jobs, jobs/5)
	assert.InDelta(t, jobs/5, moved, jobs/10)
}

func TestRemovingAnyWorkerMovesOnlyItsKeys(t *testing.T) {
	t.Parallel()
	for _, leaver := range []int{0, 2, 4} { // the oldest, a middle one, the newest
		n := addNode(t, srv.Client(), redistest.Name(t))
		ws, rs := addRecordedWorkers(t, n, 5)
		const jobs = 300
		dispatchN(t, n, jobs)
		before := settled(t, rs, jobs)

		require.NoError(t, n.RemoveWorker(testCtx(t, 20*time.Second), ws[leaver]))
		rs[leaver].mu.Lock()
		assert.Empty(t, rs[leaver].running, "the leaver's jobs were stopped")
		rs[leaver].mu.Unlock()
		survivors := append(append([]*recorder{}, rs[:leaver]...), rs[leaver+1:]...)
		idx := append(append([]int{}, seq(0, leaver)...), seq(leaver+1, 5)...)
		afterS := settled(t, survivors, jobs)
		own, others := 0, 0
		for k, w := range before {
			if w == leaver {
				own++
				continue
			}
			if idx[afterS[k]] != w {
				others++
			}
		}
		t.Logf("removing worker %d moved its %d keys and %d others", leaver, own, others)
		assert.Zero(t, others, "survivors' keys must not move")
		assert.Greater(t, own, 0)
		// The table was quiet: every job went straight to its new owner,
		// none through the job stream and a router.
		assert.EqualValues(t, own, n.test.releasesRouted.Load())
	}
}

func seq(from, to int) []int {
	var out []int
	for i := from; i < to; i++ {
		out = append(out, i)
	}
	return out
}

func TestNodeCloseMovesJobs(t *testing.T) {
	t.Parallel()
	pool := redistest.Name(t)
	n1 := addNode(t, srv.Client(), pool)
	n2 := addNode(t, srv.NewClient(), pool)
	r1, r2 := newRecorder(), newRecorder()
	addWorkers(t, n1, r1, 2)
	addWorkers(t, n2, r2, 2)
	const jobs = 200
	dispatchN(t, n1, jobs)
	require.NotEmpty(t, r2.runningKeys())

	require.NoError(t, n2.Close(testCtx(t, 20*time.Second)))
	require.NoError(t, n2.Close(context.Background()), "Close is idempotent")
	assert.Empty(t, r2.runningKeys(), "the closed node stopped its jobs")
	settled(t, []*recorder{r1}, jobs)
}

func TestLastNodeCloseKeepsJobsForTheNextWorker(t *testing.T) {
	t.Parallel()
	pool := redistest.Name(t)
	n1 := addNode(t, srv.Client(), pool)
	r1 := newRecorder()
	addWorkers(t, n1, r1, 2)
	dispatchN(t, n1, 50)
	require.NoError(t, n1.Close(testCtx(t, 20*time.Second)))
	assert.Empty(t, r1.runningKeys())

	n2 := addNode(t, srv.NewClient(), pool)
	keys, err := n2.JobKeys(testCtx(t, 5*time.Second))
	require.NoError(t, err)
	assert.Len(t, keys, 50, "no job was lost while the pool had no worker")
	r2 := newRecorder()
	addWorkers(t, n2, r2, 1)
	settled(t, []*recorder{r2}, 50)
}
