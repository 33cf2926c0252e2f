package pool_test

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/shepherd-go/shepherd/pool"
)

// WithReplicas: DispatchJob returns nil only once a replica holds the
// job's record as its Start left it. This example's Redis has no replica,
// so nothing can be acknowledged: the dispatch fails and its job is
// withdrawn. (docs/replicas.md says how to run Redis so that a failover
// undoes nothing acknowledged.)
func ExampleWithReplicas() {
	ctx := context.Background()
	rdb := redis.NewClient(&redis.Options{Addr: pool.RedisAddr()})
	defer rdb.Close()
	node, err := pool.AddNode(ctx, rdb, "example-replicas", pool.WithReplicas(1, 100*time.Millisecond))
	if err != nil {
		panic(err)
	}
	defer node.Close(ctx)
	if _, err := node.AddWorker(ctx, quiet{}); err != nil {
		panic(err)
	}
	err = node.DispatchJob(ctx, "tenant-42", []byte("config"))
	fmt.Println(errors.Is(err, pool.ErrNotReplicated))
	// Output: true
}
