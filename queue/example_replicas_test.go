package queue_test

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/shepherd-go/shepherd/queue"
)

// WithReplicas: a Submit returns nil only once a replica holds its task,
// and a future completes only once its outcome is on one. This example's
// Redis has no replica, so nothing can be acknowledged: the Submit fails
// and its task is withdrawn. (docs/replicas.md says how to run Redis so
// that a failover undoes nothing acknowledged.)
func ExampleWithReplicas() {
	ctx := context.Background()
	rdb := redis.NewClient(&redis.Options{Addr: queue.RedisAddr()})
	defer rdb.Close()
	q, err := queue.Open(ctx, rdb, "example-replicas", queue.WithReplicas(1, 100*time.Millisecond))
	if err != nil {
		panic(err)
	}
	defer q.Close(ctx)
	_, err = q.Submit(ctx, []byte("report"))
	fmt.Println(errors.Is(err, queue.ErrNotReplicated))
	// Output: true
}
