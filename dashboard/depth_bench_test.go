package dashboard

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/shepherd-go/shepherd/internal/redistest"
	"github.com/shepherd-go/shepherd/pool"
)

// BenchmarkPoolViewsAtDepth measures what the pool's views cost at depth:
// a pool of 2 nodes × 8 workers running SHEPHERD_POOL_DEPTH jobs (default
// 100,000) on a private Redis; the median of 5 reads of the overview, the
// pool page, the first and the next page of its job list, a worker's job
// list, pool.Summary (what shepherd status reads) and pool.Inspect (what
// status -exact reads), once the workers reported their jobs. Run it alone:
// go test -run '^$' -bench PoolViewsAtDepth -benchtime 1x ./dashboard/
// (issue #41 asks each under 50 ms at a million jobs: dispatching a
// million takes this machine about 13 minutes, and its Redis ~300 MB).
func BenchmarkPoolViewsAtDepth(b *testing.B) {
	depth := 100000
	if v, err := strconv.Atoi(os.Getenv("SHEPHERD_POOL_DEPTH")); err == nil && v > 0 {
		depth = v
	}
	s := redistest.Start(b)
	ctx, cancel := context.WithTimeout(context.Background(), 45*time.Minute)
	defer cancel()
	rdb := s.Client()
	name := redistest.Name(b)
	var nodes []*pool.Node
	var worker string
	for range 2 {
		n, err := pool.AddNode(ctx, rdb, name, pool.WithLogger(slog.New(slog.DiscardHandler)))
		if err != nil {
			b.Fatal(err)
		}
		defer n.Close(context.Background())
		for range 8 {
			w, err := n.AddWorker(ctx, newJobs())
			if err != nil {
				b.Fatal(err)
			}
			worker = w.ID()
		}
		nodes = append(nodes, n)
	}
	began := time.Now()
	var wg sync.WaitGroup
	errs := make(chan error, 64)
	for p := range 64 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := p; i < depth; i += 64 {
				if err := nodes[i%2].DispatchJob(ctx, fmt.Sprintf("device-%07d", i), []byte("config")); err != nil {
					errs <- err
					return
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		b.Fatal(err)
	}
	b.Logf("%d jobs dispatched in %v", depth, time.Since(began))
	for { // the workers report their jobs with their keep-alives
		st, err := pool.Summary(ctx, rdb, name)
		if err != nil {
			b.Fatal(err)
		}
		if st.Running == depth {
			break
		}
		time.Sleep(100 * time.Millisecond)
	}
	d, err := New(rdb)
	if err != nil {
		b.Fatal(err)
	}
	hs := httptest.NewServer(d)
	defer hs.Close()
	var first struct {
		Next string `json:"next_cursor"`
	}
	resp, err := http.Get(hs.URL + "/pool/" + name + "/jobs?format=json")
	if err != nil {
		b.Fatal(err)
	}
	err = json.NewDecoder(resp.Body).Decode(&first)
	resp.Body.Close()
	if err != nil || first.Next == "" {
		b.Fatalf("the job list's first page: next cursor %q, %v", first.Next, err)
	}
	views := []struct{ name, path string }{
		{"overview", "/"},
		{"pool_page", "/pool/" + name},
		{"job_list_first", "/pool/" + name + "/jobs"},
		{"job_list_next", "/pool/" + name + "/jobs?cursor=" + first.Next},
		{"worker_jobs", "/pool/" + name + "/jobs?worker=" + worker},
	}
	for b.Loop() {
		for _, v := range views {
			ms := median(5, func() error {
				resp, err := http.Get(hs.URL + v.path)
				if err != nil {
					return err
				}
				defer resp.Body.Close()
				body, _ := io.ReadAll(resp.Body)
				if resp.StatusCode != http.StatusOK || strings.Contains(string(body), "No job.") {
					return fmt.Errorf("%s: %d", v.path, resp.StatusCode)
				}
				return nil
			}, b)
			b.ReportMetric(ms, v.name+"_ms")
			b.Logf("%s: %.3f ms", v.name, ms)
		}
		ms := median(5, func() error {
			_, err := pool.Summary(ctx, rdb, name)
			return err
		}, b)
		b.ReportMetric(ms, "summary_ms")
		b.Logf("summary: %.3f ms", ms)
		// Inspect reads every record: seconds at a million, past a
		// client's default read timeout (3 s).
		slow := redis.NewClient(&redis.Options{Addr: s.Addr(), ReadTimeout: 5 * time.Minute})
		defer slow.Close()
		b.ReportMetric(median(5, func() error {
			_, err := pool.Inspect(ctx, slow, name)
			return err
		}, b), "inspect_ms")
	}
}

// median runs f n times and returns its median duration in ms.
func median(n int, f func() error, b *testing.B) float64 {
	var ds []time.Duration
	for range n {
		t0 := time.Now()
		if err := f(); err != nil {
			b.Fatal(err)
		}
		ds = append(ds, time.Since(t0))
	}
	slices.Sort(ds)
	return float64(ds[n/2].Microseconds()) / 1000
}
