package main

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/shepherd-go/shepherd/queue"
)

// T1 and T1P: the queue's throughput and Submit → result latency under
// 64 submitters.

// scenarioT1 is T1: the queue's throughput.
func scenarioT1(ctx context.Context, b *bench, _ int) (result, error) {
	return scenarioQueueThroughput(ctx, b, "t1")
}

// scenarioT1P is T1P: T1 with WithPrefetch.
func scenarioT1P(ctx context.Context, b *bench, _ int) (result, error) {
	return scenarioQueueThroughput(ctx, b, "t1p", queue.WithPrefetch(4))
}

// scenarioQueueThroughput is T1: 2 processes × 4 workers, 64 submitters,
// 20,000 tasks of 64 bytes, a no-op handler: tasks/s from the first
// Submit until the last future completed, and Submit → result latency.
// T1P is the same with serve options (WithPrefetch).
func scenarioQueueThroughput(ctx context.Context, b *bench, name string, serve ...queue.ServeOption) (result, error) {
	return b.queueThroughput(ctx, b.target(), name, nil, serve...)
}

// queueThroughput is T1's measurement on t, of a new queue named after
// name, opened with opts and served by 2 handles with 4 workers and
// serve each.
func (b *bench) queueThroughput(ctx context.Context, t queueTarget, name string, opts []queue.Option, serve ...queue.ServeOption) (result, error) {
	r := newResult()
	tasks := b.scaled(20000, 100)
	bq, err := openBenchQueue(ctx, benchQueueName(name), 2, t.newClient, noop, opts,
		append([]queue.ServeOption{queue.WithWorkers(4)}, serve...)...)
	if err != nil {
		return r, err
	}
	defer bq.close()
	cpu := startCPUOn(ctx, t.info)
	run := runThroughput(ctx, bq.submit, tasks)
	cpu.perTask(ctx, r, tasks)
	run.record(b, r, strings.ToUpper(name))
	return r, nil
}

// throughputSubmitters is T1's number of submitting goroutines.
const throughputSubmitters = 64

// throughputRun is what runThroughput saw.
type throughputRun struct {
	tasks     int
	elapsed   time.Duration // from the first Submit until the last future completed
	lat       latencies     // Submit → result
	submitLat latencies     // Submit's own
	errs      int64
	firstErr  error
}

// runThroughput is T1's measured part: 64 goroutines submit tasks tasks
// of 64 bytes to q, each waiting for its futures.
func runThroughput(ctx context.Context, q *queue.Queue, tasks int) throughputRun {
	var (
		mu        sync.Mutex
		lat       latencies
		submitLat latencies
		errs      atomic.Int64
		firstErr  atomic.Value
		wg        sync.WaitGroup
		next      atomic.Int64
	)
	fail := func(err error) {
		errs.Add(1)
		firstErr.CompareAndSwap(nil, err)
	}
	start := time.Now()
	for range throughputSubmitters {
		wg.Add(1)
		go func() {
			defer wg.Done()
			var mine, mineSubmit latencies
			var waits sync.WaitGroup
			var lmu sync.Mutex
			for next.Add(1) <= int64(tasks) {
				t0 := time.Now()
				f, err := q.Submit(ctx, payload64)
				mineSubmit = append(mineSubmit, time.Since(t0))
				if err != nil {
					fail(err)
					continue
				}
				waits.Add(1)
				go func() {
					defer waits.Done()
					if _, err := f.Wait(ctx); err != nil {
						fail(err)
						return
					}
					lmu.Lock()
					mine = append(mine, time.Since(t0))
					lmu.Unlock()
				}()
			}
			waits.Wait()
			mu.Lock()
			lat = append(lat, mine...)
			submitLat = append(submitLat, mineSubmit...)
			mu.Unlock()
		}()
	}
	wg.Wait()
	run := throughputRun{tasks: tasks, elapsed: time.Since(start), lat: lat, submitLat: submitLat, errs: errs.Load()}
	if e, ok := firstErr.Load().(error); ok {
		run.firstErr = e
	}
	return run
}

// record sets T1's metrics in r, and reports errors on stderr.
func (run throughputRun) record(b *bench, r result, scenario string) {
	if run.firstErr != nil {
		fmt.Fprintf(b.stderr, "scenario %s: %d errors, first: %v\n", scenario, run.errs, run.firstErr)
	}
	r.set("tasks", float64(run.tasks))
	r.set("tasks_per_s", float64(run.tasks-int(run.errs))/run.elapsed.Seconds())
	r.set("tasks_per_raw_xadd", r.Metrics["tasks_per_s"]/b.rawRate)
	r.setMs("submit_p50_ms", run.submitLat.pct(50))
	r.setMs("submit_p99_ms", run.submitLat.pct(99))
	r.setMs("result_p50_ms", run.lat.pct(50))
	r.setMs("result_p99_ms", run.lat.pct(99))
	r.set("errors", float64(run.errs))
}
