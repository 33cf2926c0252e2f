package pool

import (
	"fmt"
	"maps"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/shepherd-go/shepherd/internal/redistest"
)

// TestViewsAtDepth: a pool of 2 nodes × 8 workers running 100,000 jobs,
// dispatched through the API. Summary reads it from the workers' reports
// (Sampled) and, once they reported, agrees with Inspect, which reads
// every record: the jobs, the running ones, each worker's count and first
// keys. ScanJobs, page after page, lists every job, a worker's exactly,
// and those of a prefix exactly. It logs what each read took (no
// assertion on it: the machine varies; BenchmarkPoolViewsAtDepth in
// dashboard/ measures).
//
// It runs on a Redis of its own, not in parallel: 100,000 dispatches
// keep both cores busy for a while.
func TestViewsAtDepth(t *testing.T) {
	if testing.Short() {
		t.Skip("100,000 jobs: not in -short")
	}
	const total = 100_000
	ctx := testCtx(t, 8*time.Minute)
	own := redistest.Start(t)
	name := redistest.Name(t)
	var nodes []*Node
	for range 2 {
		n := addNode(t, own.NewClient(), name, WithWorkerTTL(3*time.Second), WithPendingJobTTL(time.Minute))
		addWorkers(t, n, newRecorder(), 8)
		nodes = append(nodes, n)
	}
	keys := make([]string, total)
	for i := range keys {
		keys[i] = fmt.Sprintf("device-%07d", i)
	}
	began := time.Now()
	var wg sync.WaitGroup
	for i, n := range nodes {
		wg.Add(1)
		go func() {
			defer wg.Done()
			var mine []string
			for j := i; j < total; j += len(nodes) {
				mine = append(mine, keys[j])
			}
			dispatchAll(t, ctx, n, mine, []byte("config"))
		}()
	}
	wg.Wait()
	t.Logf("%d jobs dispatched in %v", total, time.Since(began).Round(time.Millisecond))

	rdb := own.Client()
	var sum, exact *Stats
	require.Eventually(t, func() bool {
		var err error
		if exact, err = Inspect(ctx, rdb, name); err != nil {
			return false
		}
		if sum, err = Summary(ctx, rdb, name); err != nil {
			return false
		}
		return assert.ObjectsAreEqual(viewOf(exact), viewOf(sum))
	}, time.Minute, 200*time.Millisecond, "the summary agrees with Inspect once the workers reported")
	require.Equal(t, viewOf(exact), viewOf(sum))
	assert.True(t, sum.Sampled)
	assert.Equal(t, total, sum.Jobs)
	assert.Equal(t, total, sum.Running)
	assert.Len(t, sum.Workers, 16)
	assert.Equal(t, 16, sum.WorkersBusy)
	timed(t, "Summary", func() error { _, err := Summary(ctx, rdb, name); return err })
	timed(t, "Inspect", func() error { _, err := Inspect(ctx, rdb, name); return err })

	seen := map[string]bool{}
	pages := 0
	for q := (JobScan{Count: 1000}); ; pages++ {
		page, err := ScanJobs(ctx, rdb, name, q)
		require.NoError(t, err)
		for _, j := range page.Jobs {
			seen[j.Key] = true
			require.Equal(t, JobRunning, j.State, j.Key)
			require.True(t, j.WorkerHealthy, j.Key)
			require.Equal(t, len("config"), j.PayloadSize, j.Key)
		}
		if q.Cursor = page.Next; q.Cursor == "" {
			break
		}
	}
	assert.Len(t, seen, total, "every job, in %d pages", pages)
	w := exact.Workers[3]
	mine := map[string]bool{}
	for q := (JobScan{Worker: w.ID}); ; {
		page, err := ScanJobs(ctx, rdb, name, q)
		require.NoError(t, err)
		for _, j := range page.Jobs {
			mine[j.Key] = true
		}
		if q.Cursor = page.Next; q.Cursor == "" {
			break
		}
	}
	assert.Equal(t, w.Keys, slices.Sorted(maps.Keys(mine)), "exactly the jobs of worker %s", w.ID)
	var want, got []string
	for i := 12300; i < 12400; i++ {
		want = append(want, keys[i])
	}
	for q := (JobScan{Prefix: "device-00123"}); ; {
		page, err := ScanJobs(ctx, rdb, name, q)
		require.NoError(t, err)
		for _, j := range page.Jobs {
			got = append(got, j.Key)
		}
		if q.Cursor = page.Next; q.Cursor == "" {
			break
		}
	}
	slices.Sort(got)
	assert.Equal(t, want, slices.Compact(got), "exactly the keys of the prefix")
	timed(t, "ScanJobs, a first page of 50", func() error { _, err := ScanJobs(ctx, rdb, name, JobScan{}); return err })
	timed(t, "ScanJobs, a page of a worker's", func() error { _, err := ScanJobs(ctx, rdb, name, JobScan{Worker: w.ID}); return err })
}

// timed logs how long f took, the median of 5.
func timed(t *testing.T, what string, f func() error) {
	t.Helper()
	var ds []time.Duration
	for range 5 {
		began := time.Now()
		require.NoError(t, f(), what)
		ds = append(ds, time.Since(began))
	}
	slices.Sort(ds)
	t.Logf("%s: %v (median of 5)", what, ds[2].Round(time.Microsecond))
}
