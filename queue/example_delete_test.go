package queue_test

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/shepherd-go/shepherd/queue"
)

// Delete removes a queue from Redis: refused while a process has it
// open, then every key, with how many. Handy to reset a queue between
// runs while developing (shepherd queue delete does the same).
func ExampleClient_Delete() {
	ctx := context.Background()
	rdb := redis.NewClient(&redis.Options{Addr: queue.RedisAddr()})
	defer rdb.Close()
	q, err := queue.Open(ctx, rdb, "example-delete")
	if err != nil {
		panic(err)
	}
	if _, err := q.Submit(ctx, []byte("later"), queue.WithDelay(time.Hour)); err != nil {
		panic(err)
	}

	c, err := queue.NewClient(rdb, "example-delete")
	if err != nil {
		panic(err)
	}
	_, err = c.Delete(ctx)
	fmt.Println("while open:", errors.Is(err, queue.ErrInUse))

	if err := q.Close(ctx); err != nil {
		panic(err)
	}
	n, err := c.Delete(ctx)
	if err != nil {
		panic(err)
	}
	exists, _ := c.Exists(ctx)
	fmt.Println("removed keys:", n > 0, "- still there:", exists)
	// Output:
	// while open: true
	// removed keys: true - still there: false
}
