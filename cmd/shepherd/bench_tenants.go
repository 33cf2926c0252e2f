package main

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/shepherd-go/shepherd/queue"
)

// t5RunTime is how long each T5 task runs.
const t5RunTime = 2 * time.Millisecond

// scenarioTenantFairness is T5: tenant a has 20,000 tasks waiting and
// tenant b submits 100 while a's backlog drains, both with capacity 4,
// on 2 processes × 4 workers; how long b's tasks wait to start, against
// their own run time, and how much of a's backlog is left when b is
// done.
func scenarioTenantFairness(ctx context.Context, b *bench, _ int) (result, error) {
	r := newResult()
	backlog := b.scaled(20000, 2000)
	few := b.scaled(100, 10)
	var (
		mu     sync.Mutex
		starts = map[string]time.Time{}
	)
	bq, err := b.newQueue(ctx, "t5", 0, 0, nil)
	if err != nil {
		return r, err
	}
	defer bq.close()
	for _, ten := range []string{"a", "b"} {
		if err := bq.submit.SetTenant(ctx, ten, 4); err != nil {
			return r, err
		}
	}
	if _, err := submitAll(ctx, bq.submit, backlog, 16, queue.WithTenant("a")); err != nil {
		return r, err
	}
	h := func(ctx context.Context, t *queue.Task) ([]byte, error) {
		if string(t.Payload) == "b" {
			mu.Lock()
			starts[t.ID] = time.Now()
			mu.Unlock()
		}
		time.Sleep(t5RunTime)
		return nil, nil
	}
	for range 2 {
		q, err := queue.Open(ctx, b.client(64), bq.name)
		if err != nil {
			return r, err
		}
		bq.handles = append(bq.handles, q)
		if _, err := q.Serve(h, queue.WithWorkers(4)); err != nil {
			return r, err
		}
	}
	// b comes while a's backlog drains.
	for {
		tenants, err := bq.submit.Tenants(ctx)
		if err != nil {
			return r, err
		}
		if len(tenants) > 0 && tenants[0].Load > 0 {
			break
		}
		if err := sleepCtx(ctx, time.Millisecond); err != nil {
			return r, err
		}
	}
	submitted := map[string]time.Time{}
	var futures []*queue.Future
	for range few {
		t0 := time.Now()
		f, err := bq.submit.Submit(ctx, []byte("b"), queue.WithTenant("b"))
		if err != nil {
			return r, err
		}
		submitted[f.ID()] = t0
		futures = append(futures, f)
		time.Sleep(5 * time.Millisecond)
	}
	for _, f := range futures {
		if _, err := f.Wait(ctx); err != nil {
			return r, err
		}
	}
	tenants, err := bq.submit.Tenants(ctx)
	if err != nil {
		return r, err
	}
	left := int64(-1)
	for _, t := range tenants {
		if t.ID == "a" {
			left = t.Waiting
		}
	}
	if left <= 0 {
		return r, fmt.Errorf("tenant a's backlog was gone before b was done: the scenario measured nothing")
	}
	var wait latencies
	mu.Lock()
	for id, t0 := range submitted {
		wait = append(wait, starts[id].Sub(t0))
	}
	mu.Unlock()
	r.set("a_backlog", float64(backlog))
	r.set("b_tasks", float64(few))
	r.setMs("run_ms", t5RunTime)
	r.setMs("b_wait_p50_ms", wait.pct(50))
	r.setMs("b_wait_p99_ms", wait.pct(99))
	r.set("a_waiting_when_b_done", float64(left))
	return r, nil
}

func sleepCtx(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}
