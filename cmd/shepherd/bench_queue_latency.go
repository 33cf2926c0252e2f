package main

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/shepherd-go/shepherd/queue"
)

// T2, one task at a time, Submit → result; T3, delayed tasks due at once;
// T4, recovery after SIGKILL.

// scenarioQueueLatency is T2: one submitter, 2,000 sequential Submit →
// Wait round trips on the same queue as T1.
func scenarioQueueLatency(ctx context.Context, b *bench, _ int) (result, error) {
	return b.queueLatency(ctx, b.target(), "t2", nil)
}

// queueLatency is T2's measurement on t, of a new queue named after name
// and opened with opts.
func (b *bench) queueLatency(ctx context.Context, t queueTarget, name string, opts []queue.Option) (result, error) {
	r := newResult()
	tasks := b.scaled(2000, 20)
	bq, err := openBenchQueue(ctx, benchQueueName(name), 2, t.newClient, noop, opts, queue.WithWorkers(4))
	if err != nil {
		return r, err
	}
	defer bq.close()
	var lat latencies
	cpu := startCPUOn(ctx, t.info)
	for range tasks {
		t0 := time.Now()
		f, err := bq.submit.Submit(ctx, payload64)
		if err == nil {
			_, err = f.Wait(ctx)
		}
		if err != nil {
			return r, err
		}
		lat = append(lat, time.Since(t0))
	}
	cpu.perTask(ctx, r, tasks)
	r.set("tasks", float64(tasks))
	r.setMs("result_p50_ms", lat.pct(50))
	r.setMs("result_p99_ms", lat.pct(99))
	r.setMs("result_max_ms", lat.pct(100))
	return r, nil
}

// scenarioQueueDelayed is T3: 10,000 tasks due at the same instant on 2
// processes × 4 workers; how late after the due time each starts. With
// 8 workers the starts take as long as 10,000 tasks take to run, so
// first_start_late_ms shows the wake-up and p99 the throughput.
func scenarioQueueDelayed(ctx context.Context, b *bench, _ int) (result, error) {
	r := newResult()
	tasks := b.scaled(10000, 100)
	var mu sync.Mutex
	var starts []time.Time
	bq, err := b.newQueue(ctx, "t3", 2, 4, func(ctx context.Context, t *queue.Task) ([]byte, error) {
		now := time.Now()
		mu.Lock()
		starts = append(starts, now)
		mu.Unlock()
		return nil, nil
	})
	if err != nil {
		return r, err
	}
	defer bq.close()
	due := time.Now().Add(time.Second + time.Duration(tasks)*200*time.Microsecond)
	cpu := b.startCPU(ctx)
	futures, err := submitAll(ctx, bq.submit, tasks, 16, queue.WithDueAt(due))
	if err != nil {
		return r, err
	}
	if time.Now().After(due) {
		return r, errors.New("submitting took longer than the time left before the due time")
	}
	for _, f := range futures {
		if _, err := f.Wait(ctx); err != nil {
			return r, err
		}
	}
	var late latencies
	first := time.Duration(1 << 62)
	for _, s := range starts {
		late = append(late, s.Sub(due))
		first = min(first, s.Sub(due))
	}
	if first < -2*time.Millisecond {
		return r, fmt.Errorf("a task started %v before its due time", -first)
	}
	cpu.perTask(ctx, r, tasks)
	r.set("tasks", float64(tasks))
	r.setMs("first_start_late_ms", first)
	r.setMs("start_late_p50_ms", late.pct(50))
	r.setMs("start_late_p99_ms", late.pct(99))
	r.setMs("start_late_max_ms", late.pct(100))
	return r, nil
}

// queueRecoveryTTL is T4's TTL.
const queueRecoveryTTL = 2 * time.Second

// scenarioQueueRecovery is T4: a serving process runs 400 slow tasks;
// SIGKILL it and time until all of them completed on the bench
// process's workers.
func scenarioQueueRecovery(ctx context.Context, b *bench, _ int) (result, error) {
	r := newResult()
	tasks := b.scaled(400, 8)
	name := fmt.Sprintf("bench-t4-%d-%d", time.Now().UnixNano(), queueSeq.Add(1))
	child, err := startSelf(ctx, nil, "bench-queue-worker", "-redis", b.addr, "-queue", name,
		"-workers", fmt.Sprint(tasks), "-ttl", queueRecoveryTTL.String())
	if err != nil {
		return r, err
	}
	defer child.stop()
	bq, err := b.newQueue(ctx, "t4-survivor", 0, 0, nil, queue.WithTTL(queueRecoveryTTL))
	if err != nil {
		return r, err
	}
	bq.name = name
	defer bq.close()
	q, err := queue.Open(ctx, bq.clients[0], name, queue.WithTTL(queueRecoveryTTL))
	if err != nil {
		return r, err
	}
	bq.handles = append(bq.handles, q)
	cpu := b.startCPU(ctx)
	var futures []*queue.Future
	for range tasks {
		f, err := q.Submit(ctx, payload64)
		if err != nil {
			return r, err
		}
		futures = append(futures, f)
	}
	deadline := time.Now().Add(30 * time.Second)
	for {
		st, err := q.Stats(ctx)
		if err != nil {
			return r, err
		}
		if st.InFlight == int64(tasks) {
			break
		}
		if time.Now().After(deadline) {
			return r, fmt.Errorf("the serving process runs %d of %d tasks after 30s", st.InFlight, tasks)
		}
		time.Sleep(5 * time.Millisecond) // polling Redis for the child's progress
	}
	killed := time.Now()
	if err := child.kill(); err != nil {
		return r, err
	}
	if _, err := q.Serve(noop, queue.WithWorkers(64)); err != nil {
		return r, err
	}
	for _, f := range futures {
		if _, err := f.Wait(ctx); err != nil {
			return r, err
		}
	}
	cpu.perTask(ctx, r, tasks) // the submits, the child's takes, the reaping and the survivor's runs
	r.set("tasks", float64(tasks))
	r.setMs("recovery_ms", time.Since(killed))
	r.setMs("ttl_ms", queueRecoveryTTL)
	return r, nil
}
