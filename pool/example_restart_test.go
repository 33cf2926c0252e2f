package pool_test

import (
	"context"
	"fmt"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/shepherd-go/shepherd/pool"
)

// startedOnce is a JobHandler that prints its calls and says when a Start
// happened.
type startedOnce struct{ started chan string }

func (h startedOnce) Start(ctx context.Context, job *pool.Job) error {
	fmt.Println("start", job.Key)
	h.started <- job.Key
	return nil
}

func (h startedOnce) Stop(ctx context.Context, key string) error {
	fmt.Println("stop", key)
	return nil
}

// A node with a stable identity restarts without moving its jobs: Close
// stops them and keeps the node's place, and the process that comes back
// with the same id within the grace starts them again, on the same
// worker, with no dispatch.
func ExampleWithNodeID() {
	ctx := context.Background()
	rdb := redis.NewClient(&redis.Options{Addr: pool.RedisAddr(), ContextTimeoutEnabled: true})
	defer rdb.Close()
	opts := []pool.NodeOption{pool.WithNodeID("ingest-0"), pool.WithRestartGrace(time.Minute)}
	h := startedOnce{started: make(chan string, 1)}

	node, err := pool.AddNode(ctx, rdb, "example-restart", opts...)
	if err != nil {
		panic(err)
	}
	w, err := node.AddWorker(ctx, h)
	if err != nil {
		panic(err)
	}
	if err := node.DispatchJob(ctx, "tenant-42", nil); err != nil {
		panic(err)
	}
	<-h.started
	if err := node.Close(ctx); err != nil { // the process restarts
		panic(err)
	}

	node, err = pool.AddNode(ctx, rdb, "example-restart", opts...)
	if err != nil {
		panic(err)
	}
	again, err := node.AddWorker(ctx, h)
	if err != nil {
		panic(err)
	}
	<-h.started // no DispatchJob: the job comes back by itself
	fmt.Println("same worker:", again.ID() == w.ID())
	if err := node.Shutdown(ctx); err != nil {
		panic(err)
	}
	// Output:
	// start tenant-42
	// stop tenant-42
	// start tenant-42
	// same worker: true
	// stop tenant-42
}
