package main

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
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
	submitCPU := b.startCPU(ctx)
	if _, err := submitAll(ctx, bq.submit, backlog, 16, queue.WithTenant("a")); err != nil {
		return r, err
	}
	submitUsed, submitErr := submitCPU.used(ctx)
	var ran atomic.Int64 // handlers returned, a's and b's
	h := func(ctx context.Context, t *queue.Task) ([]byte, error) {
		defer ran.Add(1)
		if string(t.Payload) == "b" {
			mu.Lock()
			starts[t.ID] = time.Now()
			mu.Unlock()
		}
		time.Sleep(t5RunTime)
		return nil, nil
	}
	runCPU := b.startCPU(ctx)
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
	if err := b.t5CPU(ctx, r, bq.submit, backlog, few, &ran, submitUsed, submitErr, runCPU); err != nil {
		return r, err
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

// t5CPU records T5's redis_cpu_us_per_task, over whole tasks: it pauses
// the queue and waits until nothing runs, so that every task begun has
// finished; the CPU of serving (from the first serving handle until then,
// b's submits included) plus a's submits' CPU for the share of a's
// backlog that ran, divided by the tasks that ran.
func (b *bench) t5CPU(ctx context.Context, r result, q *queue.Queue, backlog, few int, ran *atomic.Int64,
	submitUsed float64, submitErr error, runCPU *cpuMeter) error {
	if err := q.Pause(ctx); err != nil {
		return err
	}
	deadline := time.Now().Add(30 * time.Second)
	for {
		st, err := q.Stats(ctx)
		if err != nil {
			return err
		}
		if st.InFlight == 0 {
			break
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("%d tasks still running 30s after Pause", st.InFlight)
		}
		if err := sleepCtx(ctx, 5*time.Millisecond); err != nil { // polling Redis for the last tasks
			return err
		}
	}
	runUsed, err := runCPU.used(ctx)
	tasks := ran.Load()
	if err != nil || submitErr != nil || tasks <= int64(few) {
		return nil
	}
	ranA := float64(tasks - int64(few))
	used := runUsed + submitUsed*ranA/float64(backlog)
	r.set("redis_cpu_us_per_task", used*1e6/float64(tasks))
	return nil
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
