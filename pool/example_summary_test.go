package pool_test

import (
	"context"
	"fmt"
	"slices"

	"github.com/redis/go-redis/v9"
	"github.com/shepherd-go/shepherd/pool"
)

func ExampleSummary() {
	ctx := context.Background()
	rdb := redis.NewClient(&redis.Options{Addr: pool.RedisAddr()})
	defer rdb.Close()
	node, err := pool.AddNode(ctx, rdb, "example-summary")
	if err != nil {
		panic(err)
	}
	defer node.Shutdown(ctx)
	if _, err := node.AddWorker(ctx, quiet{}); err != nil {
		panic(err)
	}
	for _, key := range []string{"tenant-7", "tenant-42"} {
		if err := node.DispatchJob(ctx, key, nil); err != nil {
			panic(err)
		}
	}

	// From any process: cheap whatever the pool's size. A pool this
	// small is read exactly; past 2,000 jobs, from the workers' reports.
	st, err := pool.Summary(ctx, rdb, "example-summary")
	if err != nil {
		panic(err)
	}
	fmt.Println(st.Jobs, "jobs,", st.Running, "running, from the reports:", st.Sampled)
	// Output:
	// 2 jobs, 2 running, from the reports: false
}

func ExampleNode_Summary() {
	ctx := context.Background()
	rdb := redis.NewClient(&redis.Options{Addr: pool.RedisAddr()})
	defer rdb.Close()
	node, err := pool.AddNode(ctx, rdb, "example-node-summary")
	if err != nil {
		panic(err)
	}
	defer node.Shutdown(ctx)
	w, err := node.AddWorker(ctx, quiet{})
	if err != nil {
		panic(err)
	}
	if err := node.DispatchJob(ctx, "tenant-42", nil); err != nil {
		panic(err)
	}
	st, err := node.Summary(ctx)
	if err != nil {
		panic(err)
	}
	fmt.Println(st.Workers[0].ID == w.ID(), st.Workers[0].Keys, st.OrphanJobs)
	// Output:
	// true [tenant-42] 0
}

func ExampleScanJobs() {
	ctx := context.Background()
	rdb := redis.NewClient(&redis.Options{Addr: pool.RedisAddr()})
	defer rdb.Close()
	node, err := pool.AddNode(ctx, rdb, "example-scan-jobs")
	if err != nil {
		panic(err)
	}
	defer node.Shutdown(ctx)
	if _, err := node.AddWorker(ctx, quiet{}); err != nil {
		panic(err)
	}
	for _, key := range []string{"tenant-7", "tenant-42", "device-1"} {
		if err := node.DispatchJob(ctx, key, []byte("config")); err != nil {
			panic(err)
		}
	}

	// Page after page, from "" until Next is "" again: a few reads a
	// page, whatever the pool's size.
	var keys []string
	for q := (pool.JobScan{Prefix: "tenant-", Count: 100}); ; {
		page, err := pool.ScanJobs(ctx, rdb, "example-scan-jobs", q)
		if err != nil {
			panic(err)
		}
		for _, job := range page.Jobs {
			keys = append(keys, fmt.Sprint(job.Key, " ", job.State, " ", job.PayloadSize))
		}
		if q.Cursor = page.Next; q.Cursor == "" {
			break
		}
	}
	slices.Sort(keys) // a page is in Redis's order
	fmt.Println(keys)
	// Output:
	// [tenant-42 running 6 tenant-7 running 6]
}
