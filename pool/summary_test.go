package pool

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/shepherd-go/shepherd/internal/redistest"
)

// sampled reads the pool as Summary does above summaryExactJobs: from the
// workers' reports, whatever its size.
func sampled(t testing.TB, ctx context.Context, n *Node) *Stats {
	t.Helper()
	st, err := readPool(ctx, n.rdb, n.pool, n.lay, false)
	require.NoError(t, err)
	require.True(t, st.Sampled)
	return st
}

// view is what a summary must agree on with an exact Inspect at rest.
type view struct {
	Jobs, Running, OrphanJobs, Busy, Idle int
	Workers                               []workerView
	Orphans                               []string
}

type workerView struct {
	ID      string
	Healthy bool
	Jobs    int
	Keys    []string
}

// viewOf projects st: from an exact snapshot, each worker's keys cut to
// the first reportKeys, and the orphans to those of each unhealthy
// worker, as a summary samples them.
func viewOf(st *Stats) view {
	v := view{Jobs: st.Jobs, Running: st.Running, OrphanJobs: st.OrphanJobs, Busy: st.WorkersBusy, Idle: st.WorkersIdle,
		Orphans: slices.Clone(st.Orphans)}
	if !st.Sampled {
		v.Orphans = nil
	}
	for _, w := range st.Workers {
		keys := w.Keys[:min(len(w.Keys), reportKeys)]
		v.Workers = append(v.Workers, workerView{ID: w.ID, Healthy: w.Healthy, Jobs: w.Jobs, Keys: slices.Clone(keys)})
		if !st.Sampled && !w.Healthy {
			v.Orphans = append(v.Orphans, keys...)
		}
	}
	slices.Sort(v.Orphans)
	if len(v.Orphans) == 0 {
		v.Orphans = nil
	}
	return v
}

// requireSummaryConverges waits until a summary read from the reports
// (they follow the keep-alives) agrees with an exact Inspect of the pool
// at rest, and returns it.
func requireSummaryConverges(t testing.TB, ctx context.Context, n *Node, timeout time.Duration) (sum, exact *Stats) {
	t.Helper()
	require.Eventually(t, func() bool {
		var err error
		if exact, err = inspect(ctx, n.rdb, n.pool, n.lay); err != nil {
			return false
		}
		sum = sampled(t, ctx, n)
		return assert.ObjectsAreEqual(viewOf(exact), viewOf(sum))
	}, timeout, 50*time.Millisecond, "the summary agrees with Inspect once the workers reported")
	require.Equal(t, viewOf(exact), viewOf(sum))
	return sum, exact
}

// TestSummaryFromReports: a summary read from the workers' reports (no
// job record read) counts what Inspect counts from every record, once
// the workers reported; with every node dead, each worker's jobs are
// orphans, and the sample of them names real orphans.
func TestSummaryFromReports(t *testing.T) {
	t.Parallel()
	ctx := testCtx(t, 60*time.Second)
	name := redistest.Name(t)
	a := addNode(t, srv.Client(), name)
	b := addNode(t, srv.NewClient(), name)
	addWorkers(t, a, newRecorder(), 3)
	addWorkers(t, b, newRecorder(), 2)
	const total = 60
	for i := range total {
		require.NoError(t, a.DispatchJob(ctx, keyN(i), []byte("p")))
	}
	sum, exact := requireSummaryConverges(t, ctx, a, 10*time.Second)
	assert.Equal(t, total, sum.Running)
	assert.Empty(t, sum.Orphans)
	for _, w := range sum.Workers {
		assert.Len(t, w.Keys, reportKeys, "every worker runs more than %d jobs", reportKeys)
	}

	// Summary of a pool this small reads every record: exact.
	small, err := Summary(ctx, srv.Client(), name)
	require.NoError(t, err)
	assert.False(t, small.Sampled)
	for i, w := range exact.Workers {
		assert.Equal(t, w.Keys, small.Workers[i].Keys, "every key of worker %s", w.ID)
	}

	// Every node dies: each worker's jobs are orphans.
	a.crash()
	b.crash()
	require.Eventually(t, func() bool {
		st, err := Inspect(ctx, srv.Client(), name)
		return err == nil && st.OrphanJobs == total
	}, 10*time.Second, 20*time.Millisecond)
	sum, exact = requireSummaryConverges(t, ctx, a, 10*time.Second)
	assert.Equal(t, total, sum.OrphanJobs)
	assert.Len(t, sum.Orphans, 5*reportKeys)
	assert.Subset(t, exact.Orphans, sum.Orphans)
}

// TestReportsLeaveWithTheirWorker: a worker's report goes with it, so a
// pool whose nodes all closed keeps no report (the keys test checks no
// key is left behind).
func TestReportsLeaveWithTheirWorker(t *testing.T) {
	t.Parallel()
	ctx := testCtx(t, 30*time.Second)
	name := redistest.Name(t)
	n := addNode(t, srv.Client(), name)
	ws := addWorkers(t, n, newRecorder(), 2)
	require.NoError(t, n.DispatchJob(ctx, keyN(1), nil))
	field := reportField(ws[0].ID())
	require.Eventually(t, func() bool {
		fields, err := srv.Client().HKeys(ctx, n.lay.alive).Result()
		return err == nil && slices.Contains(fields, reportField(ws[0].ID())) && slices.Contains(fields, reportField(ws[1].ID()))
	}, 10*time.Second, 20*time.Millisecond, "both workers report")
	require.NoError(t, n.RemoveWorker(ctx, ws[0]))
	ok, err := srv.Client().HExists(ctx, n.lay.alive, field).Result()
	require.NoError(t, err)
	assert.False(t, ok, "the removed worker's report is gone")
	sum := sampled(t, ctx, n)
	require.Len(t, sum.Workers, 1)
}

// TestFirstKeys: a worker reports the first of its keys, sorted.
func TestFirstKeys(t *testing.T) {
	t.Parallel()
	m := map[string]header{}
	var all []string
	for i := range 100 {
		k := fmt.Sprintf("k%03d", (i*37)%100)
		m[k] = header{}
		all = append(all, k)
	}
	slices.Sort(all)
	assert.Equal(t, all[:reportKeys], firstKeys(m, reportKeys))
	assert.Equal(t, []string{"a", "b"}, firstKeys(map[string]header{"b": {}, "a": {}}, reportKeys))
	assert.Empty(t, firstKeys(nil, reportKeys))
}

// dispatchAll dispatches keys from 64 goroutines.
func dispatchAll(t testing.TB, ctx context.Context, n *Node, keys []string, payload []byte) {
	var wg sync.WaitGroup
	errs := make(chan error, 64)
	for p := range 64 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := p; i < len(keys); i += 64 {
				if err := n.DispatchJob(ctx, keys[i], payload); err != nil {
					errs <- err
					return
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	require.NoError(t, <-errs)
}

// TestAKeepAliveReportsCountAndKeysOfOneMoment: the first keep-alive
// after jobs started reports them, count and keys alike (it used to name
// the keys of the keep-alive before, so that a summary showed 2 jobs and
// no key until the next one).
func TestAKeepAliveReportsCountAndKeysOfOneMoment(t *testing.T) {
	t.Parallel()
	ctx := testCtx(t, 30*time.Second)
	name := redistest.Name(t)
	n := addNode(t, srv.Client(), name)
	addWorkers(t, n, newRecorder(), 2)
	_, err := n.keepAlive(ctx) // a report of no jobs
	require.NoError(t, err)
	n.pauseKeepAlive(true) // from here on, only the keep-alives below
	t.Cleanup(func() { n.pauseKeepAlive(false) })
	// The loops are idle: whatever the machine's load, they answer.
	n.test.reportWait.Store(int64(10 * time.Second))
	for round, total := range []int{12, 30} {
		for i := round * 12; i < total; i++ {
			require.NoError(t, n.DispatchJob(ctx, keyN(i), nil))
		}
		_, err := n.keepAlive(ctx)
		require.NoError(t, err)
		exact, err := inspect(ctx, n.rdb, n.pool, n.lay)
		require.NoError(t, err)
		require.Equal(t, total, exact.Running)
		assert.Equal(t, viewOf(exact), viewOf(sampled(t, ctx, n)), "after %d jobs", total)
	}
}
