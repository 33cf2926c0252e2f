package queue_test

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/redis/go-redis/v9"

	"github.com/shepherd-go/shepherd/queue"
)

// A handler's panic: the attempt's error is one line, and the stack of
// the panic is kept apart, starting at the frame that panicked.
func ExampleAttemptError() {
	ctx := context.Background()
	rdb := redis.NewClient(&redis.Options{Addr: queue.RedisAddr()})
	defer rdb.Close()
	q, err := queue.Open(ctx, rdb, "example-panic")
	if err != nil {
		panic(err)
	}
	defer q.Close(ctx)
	if _, err := q.Serve(func(ctx context.Context, t *queue.Task) ([]byte, error) {
		var rows []string
		return []byte(rows[len(t.Payload)]), nil // a bug: index out of range
	}, queue.WithWorkers(1)); err != nil {
		panic(err)
	}
	f, _ := q.Submit(ctx, []byte("report"), queue.WithTaskID("report-7"), queue.WithMaxAttempts(1))
	_, err = f.Wait(ctx)
	fmt.Println(err)

	var te *queue.TaskError
	if errors.As(err, &te) {
		stack := strings.Split(te.Attempts[0].Stack, "\n")
		fmt.Println(stack[0][:len("goroutine")])
		fmt.Println(strings.Contains(stack[1], "ExampleAttemptError"))
	}
	_, _ = q.PurgeDead(ctx)
	// Output:
	// queue: task report-7 failed after 1 attempt(s): attempt 1: panic: runtime error: index out of range [6] with length 0
	// goroutine
	// true
}
