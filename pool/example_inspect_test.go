package pool_test

import (
	"context"
	"errors"
	"fmt"

	"github.com/redis/go-redis/v9"
	"github.com/shepherd-go/shepherd/pool"
)

func ExampleInspectJob() {
	ctx := context.Background()
	rdb := redis.NewClient(&redis.Options{Addr: pool.RedisAddr()})
	defer rdb.Close()
	node, err := pool.AddNode(ctx, rdb, "example-inspect-job")
	if err != nil {
		panic(err)
	}
	defer node.Shutdown(ctx)
	w, err := node.AddWorker(ctx, quiet{})
	if err != nil {
		panic(err)
	}
	if err := node.DispatchJob(ctx, "tenant-42", []byte("config v1")); err != nil {
		panic(err)
	}

	// From any process, without joining the pool.
	job, err := pool.InspectJob(ctx, rdb, "example-inspect-job", "tenant-42")
	if err != nil {
		panic(err)
	}
	fmt.Println(job.State, "on its worker:", job.Worker == w.ID(), "healthy:", job.WorkerHealthy)
	fmt.Println("attempt", job.Attempt, "payload", string(job.Payload), "running since start:", job.Changed.Equal(job.Started))

	_, err = pool.InspectJob(ctx, rdb, "example-inspect-job", "tenant-7")
	fmt.Println(errors.Is(err, pool.ErrJobNotFound))
	// Output:
	// running on its worker: true healthy: true
	// attempt 1 payload config v1 running since start: true
	// true
}

func ExampleJobKeys() {
	ctx := context.Background()
	rdb := redis.NewClient(&redis.Options{Addr: pool.RedisAddr()})
	defer rdb.Close()
	node, err := pool.AddNode(ctx, rdb, "example-job-keys")
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

	// From any process, without joining the pool.
	keys, err := pool.JobKeys(ctx, rdb, "example-job-keys")
	if err != nil {
		panic(err)
	}
	fmt.Println(keys)
	// Output: [tenant-42 tenant-7]
}
