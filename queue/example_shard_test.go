package queue_test

import (
	"context"
	"fmt"

	"github.com/redis/go-redis/v9"

	"github.com/shepherd-go/shepherd/queue"
)

// A queue spread over 3 shards: on Redis Cluster (a *redis.ClusterClient)
// each shard's hash tag can live on another master. A tenant's tasks stay
// on its shard; the others spread; the workers take from every shard.
func ExampleWithShards() {
	ctx := context.Background()
	rdb := redis.NewClient(&redis.Options{Addr: queue.RedisAddr()}) // or redis.NewClusterClient(...)
	defer rdb.Close()
	q, err := queue.Open(ctx, rdb, "example-shards", queue.WithShards(3))
	if err != nil {
		panic(err)
	}
	defer q.Close(ctx)
	if err := q.SetTenant(ctx, "acme", 2); err != nil {
		panic(err)
	}
	if _, err := q.Serve(func(ctx context.Context, t *queue.Task) ([]byte, error) {
		return []byte("done: " + string(t.Payload)), nil
	}, queue.WithWorkers(2)); err != nil {
		panic(err)
	}
	for _, opts := range [][]queue.SubmitOption{{queue.WithTenant("acme")}, nil} {
		f, err := q.Submit(ctx, []byte("a task"), opts...)
		if err != nil {
			panic(err)
		}
		res, err := f.Wait(ctx)
		if err != nil {
			panic(err)
		}
		fmt.Println(string(res))
	}
	st, err := q.Stats(ctx)
	if err != nil {
		panic(err)
	}
	fmt.Println("shards:", st.Shards)
	// Output:
	// done: a task
	// done: a task
	// shards: 3
}

// The shard count is set when a queue is made; Reshard changes it while
// the queue is idle: no process open, nothing unfinished, no dead letter.
func ExampleClient_Reshard() {
	ctx := context.Background()
	rdb := redis.NewClient(&redis.Options{Addr: queue.RedisAddr()})
	defer rdb.Close()
	q, err := queue.Open(ctx, rdb, "example-reshard")
	if err != nil {
		panic(err)
	}
	if err := q.SetTenant(ctx, "acme", 4); err != nil {
		panic(err)
	}
	if err := q.Close(ctx); err != nil { // every process closes first
		panic(err)
	}

	c, err := queue.NewClient(rdb, "example-reshard")
	if err != nil {
		panic(err)
	}
	if err := c.Reshard(ctx, 4); err != nil {
		panic(err)
	}
	q, err = queue.Open(ctx, rdb, "example-reshard") // adopts the 4 shards
	if err != nil {
		panic(err)
	}
	defer q.Close(ctx)
	st, err := q.Stats(ctx)
	if err != nil {
		panic(err)
	}
	tenants, err := q.Tenants(ctx)
	if err != nil {
		panic(err)
	}
	fmt.Println("shards:", st.Shards, "tenant:", tenants[0].ID, tenants[0].Capacity)
	// Output: shards: 4 tenant: acme 4
}
