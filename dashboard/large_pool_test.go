package dashboard

import (
	"encoding/json"
	"fmt"
	"maps"
	"net/http"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/shepherd-go/shepherd/internal/redistest"
	"github.com/shepherd-go/shepherd/pool"
)

// getJSON fetches a page's JSON twin into v.
func getJSON(t *testing.T, url string, v any) {
	t.Helper()
	code, body := get(t, url+map[bool]string{true: "&", false: "?"}[strings.Contains(url, "?")]+"format=json")
	require.Equal(t, http.StatusOK, code, body)
	require.NoError(t, json.Unmarshal([]byte(body), v), body)
}

// TestViewsOfALargePool: a pool of more than 2,000 jobs is shown from
// its workers' reports (pool.Summary) and its job list read page by page
// (pool.ScanJobs). Once the workers reported, the overview and the pool
// page count what an exact Inspect counts, and say the counts are
// reported; following the job list's pages lists every job, a worker's
// list exactly its jobs, a prefix exactly its keys; a search naming a
// job goes to it. (TestViewsAtDepth in pool/ does it with 100,000.)
func TestViewsOfALargePool(t *testing.T) {
	const total = 3000
	ctx := testCtx(t, 2*time.Minute)
	name := redistest.Name(t)
	n, err := pool.AddNode(ctx, srv.Client(), name, pool.WithWorkerTTL(time.Second))
	require.NoError(t, err)
	t.Cleanup(func() { _ = n.Close(ctx) })
	for range 4 {
		_, err := n.AddWorker(ctx, newJobs())
		require.NoError(t, err)
	}
	var wg sync.WaitGroup
	for p := range 32 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := p; i < total; i += 32 {
				assert.NoError(t, n.DispatchJob(ctx, fmt.Sprintf("dev-%05d", i), nil))
			}
		}()
	}
	wg.Wait()
	exact, err := pool.Inspect(ctx, srv.Client(), name)
	require.NoError(t, err)
	// A worker's report is as old as its last keep-alive, and names the
	// keys of an earlier moment when its loop was too busy to answer the
	// keep-alive at once (pool/report.go): wait for both.
	require.Eventually(t, func() bool {
		st, err := pool.Summary(ctx, srv.Client(), name)
		if err != nil || st.Running != total || len(st.Workers) != len(exact.Workers) {
			return false
		}
		for i, w := range exact.Workers {
			if !slices.Equal(st.Workers[i].Keys, w.Keys[:8]) {
				return false
			}
		}
		return true
	}, 30*time.Second, 50*time.Millisecond, "the workers report their jobs")
	_, base := serve(t)

	var l Listing
	getJSON(t, base+"/", &l)
	i := slices.IndexFunc(l.Pools, func(p PoolRow) bool { return p.Name == name })
	require.GreaterOrEqual(t, i, 0)
	assert.Equal(t, PoolRow{Name: name, Nodes: 1, NodesHealthy: 1, Workers: 4, WorkersHealthy: 4, Jobs: total, Running: total, Health: "ok"}, l.Pools[i])

	var pv struct {
		Stats pool.Stats `json:"stats"`
	}
	getJSON(t, base+"/pool/"+name, &pv)
	assert.True(t, pv.Stats.Sampled)
	assert.Equal(t, total, pv.Stats.Jobs)
	require.Len(t, pv.Stats.Workers, 4)
	for i, w := range exact.Workers {
		assert.Equal(t, w.Jobs, pv.Stats.Workers[i].Jobs, w.ID)
		assert.Equal(t, w.Keys[:8], pv.Stats.Workers[i].Keys, w.ID)
	}
	code, body := get(t, base+"/pool/"+name)
	require.Equal(t, http.StatusOK, code)
	assert.Contains(t, body, `id="sampled"`)
	w := exact.Workers[1]
	assert.Contains(t, body, fmt.Sprintf("and %d more</a>", w.Jobs-8), "the worker's other jobs, counted")

	type listPage struct {
		Scan  bool `json:"scan"`
		Total int  `json:"total"`
		Jobs  []struct {
			Key   string `json:"key"`
			State string `json:"state"`
		} `json:"jobs"`
		Next string `json:"next_cursor"`
	}
	list := func(query string) (map[string]bool, int) {
		seen, pages := map[string]bool{}, 0
		for cursor := ""; ; pages++ {
			var p listPage
			url := base + "/pool/" + name + "/jobs?" + query
			if cursor != "" {
				url += "&cursor=" + cursor
			}
			getJSON(t, url, &p)
			require.True(t, p.Scan)
			for _, j := range p.Jobs {
				seen[j.Key] = true
				require.Equal(t, "running", j.State)
			}
			if pages == 0 && !strings.Contains(query, "q=") {
				want := total
				if strings.Contains(query, "worker=") {
					want = w.Jobs
				}
				assert.Equal(t, want, p.Total, query)
			}
			if cursor = p.Next; cursor == "" {
				return seen, pages + 1
			}
		}
	}
	all, pages := list("")
	assert.Len(t, all, total, "every job")
	assert.Greater(t, pages, total/100, "pages of about 50")
	mine, _ := list("worker=" + w.ID)
	assert.Equal(t, w.Keys, slices.Sorted(maps.Keys(mine)), "the worker's jobs")
	some, _ := list("q=dev-012")
	assert.Len(t, some, 100, "dev-01200 to dev-01299")
	for k := range some {
		assert.True(t, strings.HasPrefix(k, "dev-012"), k)
	}
	resp, _ := request(t, http.MethodGet, base+"/pool/"+name+"/jobs?q=dev-00042", "")
	assert.Equal(t, http.StatusSeeOther, resp.StatusCode)
	assert.Equal(t, "/pool/"+name+"/job/dev-00042", resp.Header.Get("Location"))
	code, body = get(t, base+"/pool/"+name+"/jobs?cursor=nonsense")
	assert.Equal(t, http.StatusBadRequest, code, body)
}
