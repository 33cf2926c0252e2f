package queue_test

import (
	"context"
	"fmt"

	"github.com/redis/go-redis/v9"

	"github.com/shepherd-go/shepherd/queue"
)

// Periodic tasks: every serving process runs the scheduler, and each
// tick is enqueued once across them.
func ExampleClient_SetSchedule() {
	ctx := context.Background()
	rdb := redis.NewClient(&redis.Options{Addr: queue.RedisAddr()})
	defer rdb.Close()
	q, err := queue.Open(ctx, rdb, "example-schedules")
	if err != nil {
		panic(err)
	}
	defer q.Close(ctx)
	ticks := make(chan string, 10)
	if _, err := q.Serve(func(ctx context.Context, t *queue.Task) ([]byte, error) {
		if name, _, ok := queue.TickOf(t.ID); ok { // which schedule, which tick
			ticks <- fmt.Sprintf("%s: %s", name, t.Payload)
		}
		return nil, nil
	}); err != nil {
		panic(err)
	}

	// Any process may set a schedule, and set it again as it is.
	if err := q.SetSchedule(ctx, "heartbeat", "@every 1s", []byte("ping")); err != nil {
		panic(err)
	}
	if err := q.SetSchedule(ctx, "nightly-report", "0 3 * * *", []byte("report"),
		queue.WithTimeZone("Europe/Paris"), queue.WithNoOverlap(),
		queue.WithTaskOptions(queue.WithMaxAttempts(3))); err != nil {
		panic(err)
	}
	fmt.Println(<-ticks)
	fmt.Println(<-ticks)

	schedules, err := q.Schedules(ctx)
	if err != nil {
		panic(err)
	}
	for _, s := range schedules {
		fmt.Printf("%s %q %s next in the future: %v\n", s.Name, s.Spec, s.TimeZone, s.Next.After(s.LastTick))
	}
	for _, s := range schedules {
		_ = q.RemoveSchedule(ctx, s.Name)
	}
	// Output:
	// heartbeat: ping
	// heartbeat: ping
	// heartbeat "@every 1s"  next in the future: true
	// nightly-report "0 3 * * *" Europe/Paris next in the future: true
}
