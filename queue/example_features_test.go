package queue_test

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/shepherd-go/shepherd/queue"
)

// Tasks of a higher priority are taken first; tasks of one priority in
// the order they came.
func ExampleWithPriority() {
	ctx := context.Background()
	rdb := redis.NewClient(&redis.Options{Addr: queue.RedisAddr()})
	defer rdb.Close()
	q, err := queue.Open(ctx, rdb, "example-priorities")
	if err != nil {
		panic(err)
	}
	defer q.Close(ctx)

	// Queued before any worker serves, so the order shows.
	var fs []*queue.Future
	for _, t := range []struct {
		name string
		pri  int
	}{{"report", 0}, {"password-reset", 9}, {"newsletter", 0}, {"invoice", 5}} {
		f, err := q.Submit(ctx, []byte(t.name), queue.WithPriority(t.pri))
		if err != nil {
			panic(err)
		}
		fs = append(fs, f)
	}
	var mu sync.Mutex
	if _, err := q.Serve(func(ctx context.Context, t *queue.Task) ([]byte, error) {
		mu.Lock()
		defer mu.Unlock()
		fmt.Println(string(t.Payload))
		return nil, nil
	}, queue.WithWorkers(1)); err != nil {
		panic(err)
	}
	for _, f := range fs {
		if _, err := f.Wait(ctx); err != nil {
			panic(err)
		}
	}
	// Output:
	// password-reset
	// invoice
	// report
	// newsletter
}

// A tenant limited to 5 task starts a second: the tasks over the rate
// wait in Redis, and start as the rate allows.
func ExampleClient_SetTenantRate() {
	ctx := context.Background()
	rdb := redis.NewClient(&redis.Options{Addr: queue.RedisAddr()})
	defer rdb.Close()
	q, err := queue.Open(ctx, rdb, "example-rates")
	if err != nil {
		panic(err)
	}
	defer q.Close(ctx)

	if err := q.SetTenant(ctx, "acme", 10); err != nil {
		panic(err)
	}
	rate, err := queue.ParseRate("5/1s") // or queue.Rate{N: 5, Per: time.Second}
	if err != nil {
		panic(err)
	}
	if err := q.SetTenantRate(ctx, "acme", rate); err != nil {
		panic(err)
	}
	if _, err := q.Serve(func(ctx context.Context, t *queue.Task) ([]byte, error) {
		return nil, nil
	}, queue.WithWorkers(4)); err != nil {
		panic(err)
	}
	start := time.Now()
	var fs []*queue.Future
	for range 6 {
		f, err := q.Submit(ctx, nil, queue.WithTenant("acme"))
		if err != nil {
			panic(err)
		}
		fs = append(fs, f)
	}
	for _, f := range fs {
		if _, err := f.Wait(ctx); err != nil {
			panic(err)
		}
	}
	// One start at once (the burst: 5/50, at least 1), then one every
	// 200ms, the first of them up to 100ms sooner (a start late by less
	// than half the interval keeps its place, and an unused rate counts
	// as that late).
	fmt.Println("rate:", rate, "- 6 tasks took at least 0.9s:", time.Since(start) >= 890*time.Millisecond)
	// Output: rate: 5/1s - 6 tasks took at least 0.9s: true
}

// Pause holds every task of the queue, in every process, until Resume.
func ExampleClient_Pause() {
	ctx := context.Background()
	rdb := redis.NewClient(&redis.Options{Addr: queue.RedisAddr()})
	defer rdb.Close()
	q, err := queue.Open(ctx, rdb, "example-pause")
	if err != nil {
		panic(err)
	}
	defer q.Close(ctx)

	if err := q.Pause(ctx); err != nil { // from any process, or: shepherd queue pause
		panic(err)
	}
	if _, err := q.Serve(func(ctx context.Context, t *queue.Task) ([]byte, error) {
		return []byte("done"), nil
	}); err != nil {
		panic(err)
	}
	f, err := q.Submit(ctx, nil)
	if err != nil {
		panic(err)
	}
	wait, cancel := context.WithTimeout(ctx, 200*time.Millisecond)
	_, err = f.Wait(wait)
	cancel()
	st, _ := q.Stats(ctx)
	fmt.Println("paused:", st.Paused, "- waited:", err, "- available:", st.Available)

	if err := q.Resume(ctx); err != nil {
		panic(err)
	}
	res, err := f.Wait(ctx)
	fmt.Println(string(res), err)
	// Output:
	// paused: true - waited: context deadline exceeded - available: 1
	// done <nil>
}

// A second Submit with the same deduplication key, within its window,
// queues nothing: it gets the first task's future.
func ExampleWithDedup() {
	ctx := context.Background()
	rdb := redis.NewClient(&redis.Options{Addr: queue.RedisAddr()})
	defer rdb.Close()
	q, err := queue.Open(ctx, rdb, "example-dedup")
	if err != nil {
		panic(err)
	}
	defer q.Close(ctx)
	if _, err := q.Serve(func(ctx context.Context, t *queue.Task) ([]byte, error) {
		return append([]byte("charged "), t.Payload...), nil
	}); err != nil {
		panic(err)
	}

	first, err := q.Submit(ctx, []byte("order 7"), queue.WithDedup("charge:order-7", 10*time.Minute))
	if err != nil {
		panic(err)
	}
	again, err := q.Submit(ctx, []byte("order 7"), queue.WithDedup("charge:order-7", 10*time.Minute))
	if err != nil {
		panic(err)
	}
	res, err := again.Wait(ctx)
	fmt.Println(again.Duplicate(), again.ID() == first.ID(), string(res), err)
	// Output: true true charged order 7 <nil>
}
