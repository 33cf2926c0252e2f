package queue_test

import (
	"context"
	"errors"
	"fmt"

	"github.com/redis/go-redis/v9"

	"github.com/shepherd-go/shepherd/queue"
)

// Deleting one dead letter after looking at it.
func ExampleClient_DeleteDead() {
	ctx := context.Background()
	rdb := redis.NewClient(&redis.Options{Addr: queue.RedisAddr()})
	defer rdb.Close()
	q, err := queue.Open(ctx, rdb, "example-delete-dead")
	if err != nil {
		panic(err)
	}
	defer q.Close(ctx)
	if _, err := q.Serve(func(ctx context.Context, t *queue.Task) ([]byte, error) {
		return nil, queue.Permanent(errors.New("no such customer"))
	}, queue.WithWorkers(1)); err != nil {
		panic(err)
	}
	f, _ := q.Submit(ctx, []byte("customer 9"), queue.WithTaskID("invoice-9"))
	<-f.Done()

	dead, _ := q.DeadLetters(ctx, 0, 10)
	fmt.Println(dead[0].ID, dead[0].Errors[0].Err)
	if err := q.DeleteDead(ctx, "invoice-9"); err != nil {
		panic(err)
	}
	st, _ := q.Stats(ctx)
	fmt.Println(st.Dead, "dead letters")
	// Output:
	// invoice-9 no such customer
	// 0 dead letters
}
