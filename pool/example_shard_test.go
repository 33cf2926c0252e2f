package pool_test

import (
	"context"
	"fmt"
	"sort"
	"strings"

	"github.com/redis/go-redis/v9"

	"github.com/shepherd-go/shepherd/pool"
)

// A pool of several shards spreads its jobs over that many Redis Cluster
// slots, so over as many masters. The code is the same as for a pool of
// one shard: the node routes every call to the key's shard, and Stats
// adds the shards up. (One Redis here: the shards are keys of their own,
// each with its own hash tag.)
func ExampleWithShards() {
	ctx := context.Background()
	rdb := redis.NewClient(&redis.Options{Addr: pool.RedisAddr(), ContextTimeoutEnabled: true})
	defer rdb.Close()

	node, err := pool.AddNode(ctx, rdb, "example-shards", pool.WithShards(4))
	if err != nil {
		panic(err)
	}
	defer node.Shutdown(ctx)
	if _, err := node.AddWorker(ctx, quietJobs{}); err != nil {
		panic(err)
	}
	for i := range 100 {
		if err := node.DispatchJob(ctx, fmt.Sprintf("device-%d", i), nil); err != nil {
			panic(err)
		}
	}
	st, err := node.Stats(ctx)
	if err != nil {
		panic(err)
	}
	fmt.Println("jobs:", st.Jobs, "running:", st.Running, "workers:", len(st.Workers))

	// Each shard is a hash tag of its own: {example-shards}, {example-shards#1}, ...
	tags := map[string]bool{}
	keys, err := rdb.Keys(ctx, "shepherd:{example-shards*}:pool:jobs").Result()
	if err != nil {
		panic(err)
	}
	for _, k := range keys {
		tags[k[strings.Index(k, "{"):strings.Index(k, "}")+1]] = true
	}
	var list []string
	for t := range tags {
		list = append(list, t)
	}
	sort.Strings(list)
	fmt.Println(list)
	// Output:
	// jobs: 100 running: 100 workers: 1
	// [{example-shards#1} {example-shards#2} {example-shards#3} {example-shards}]
}

// quietJobs is a JobHandler that does nothing.
type quietJobs struct{}

func (quietJobs) Start(context.Context, *pool.Job) error { return nil }
func (quietJobs) Stop(context.Context, string) error     { return nil }

// ShardCount reads a pool's shard count without joining it, as the
// shepherd CLI's pool move-shard does before it moves a shard.
func ExampleShardCount() {
	ctx := context.Background()
	rdb := redis.NewClient(&redis.Options{Addr: pool.RedisAddr()})
	defer rdb.Close()
	node, err := pool.AddNode(ctx, rdb, "example-shard-count", pool.WithShards(3))
	if err != nil {
		panic(err)
	}
	defer node.Shutdown(ctx)

	n, err := pool.ShardCount(ctx, rdb, "example-shard-count")
	if err != nil {
		panic(err)
	}
	fmt.Println("shards:", n)
	n, err = pool.ShardCount(ctx, rdb, "example-no-such-pool")
	if err != nil {
		panic(err)
	}
	fmt.Println("a pool Redis holds nothing of:", n)
	// Output:
	// shards: 3
	// a pool Redis holds nothing of: 1
}
