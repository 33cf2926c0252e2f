package main

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/shepherd-go/shepherd/queue"
)

// The queue's scenarios: T1 throughput (T1P with WithPrefetch), T2 latency, T3 delayed tasks due
// at once, T4 recovery after SIGKILL, TM Redis memory per task.

// scenarioT1 is T1: the queue's throughput.
func scenarioT1(ctx context.Context, b *bench, _ int) (result, error) {
	return scenarioQueueThroughput(ctx, b, "t1")
}

// scenarioT1P is T1P: T1 with WithPrefetch.
func scenarioT1P(ctx context.Context, b *bench, _ int) (result, error) {
	return scenarioQueueThroughput(ctx, b, "t1p", queue.WithPrefetch(4))
}

var queueSeq atomic.Int64

// benchQueue is a queue served by some handles in the bench process, and
// a submit-only handle.
type benchQueue struct {
	name    string
	submit  *queue.Queue
	handles []*queue.Queue
	clients []*redis.Client
}

func (b *bench) newQueue(ctx context.Context, scenario string, procs, workers int, h queue.Handler, opts ...queue.Option) (*benchQueue, error) {
	return b.newQueueServing(ctx, scenario, procs, h, opts, queue.WithWorkers(workers))
}

// newQueueServing is newQueue with serve options.
func (b *bench) newQueueServing(ctx context.Context, scenario string, procs int, h queue.Handler, opts []queue.Option, serve ...queue.ServeOption) (*benchQueue, error) {
	bq := &benchQueue{name: fmt.Sprintf("bench-%s-%d-%d", scenario, time.Now().UnixNano(), queueSeq.Add(1))}
	openOne := func() (*queue.Queue, error) {
		c := b.client(128)
		bq.clients = append(bq.clients, c)
		q, err := queue.Open(ctx, c, bq.name, opts...)
		if err != nil {
			return nil, err
		}
		bq.handles = append(bq.handles, q)
		return q, nil
	}
	for range procs {
		q, err := openOne()
		if err != nil {
			bq.close()
			return nil, err
		}
		if _, err := q.Serve(h, serve...); err != nil {
			bq.close()
			return nil, err
		}
	}
	q, err := openOne()
	if err != nil {
		bq.close()
		return nil, err
	}
	bq.submit = q
	return bq, nil
}

// close closes every handle and deletes the queue's keys.
func (bq *benchQueue) close() {
	ctx := context.Background()
	for _, q := range bq.handles {
		_ = q.Close(ctx)
	}
	if len(bq.clients) > 0 {
		c := bq.clients[0]
		var batch []string
		for _, pattern := range queueKeyPatterns(bq.name) {
			iter := c.Scan(ctx, 0, pattern, 1000).Iterator()
			for iter.Next(ctx) {
				if batch = append(batch, iter.Val()); len(batch) == 1000 {
					_ = c.Unlink(ctx, batch...).Err()
					batch = batch[:0]
				}
			}
		}
		if len(batch) > 0 {
			_ = c.Unlink(ctx, batch...).Err()
		}
	}
	for _, c := range bq.clients {
		_ = c.Close()
	}
}

func noop(context.Context, *queue.Task) ([]byte, error) { return nil, nil }

var payload64 = make([]byte, 64)

// scenarioQueueThroughput is T1: 2 processes × 4 workers, 64 submitters,
// 20,000 tasks of 64 bytes, a no-op handler: tasks/s from the first
// Submit until the last future completed, and Submit → result latency.
// T1P is the same with serve options (WithPrefetch).
func scenarioQueueThroughput(ctx context.Context, b *bench, name string, serve ...queue.ServeOption) (result, error) {
	r := newResult()
	tasks := b.scaled(20000, 100)
	bq, err := b.newQueueServing(ctx, name, 2, noop, nil, append([]queue.ServeOption{queue.WithWorkers(4)}, serve...)...)
	if err != nil {
		return r, err
	}
	defer bq.close()
	const submitters = 64
	cpu := b.startCPU(ctx)
	var (
		mu        sync.Mutex
		lat       latencies
		submitLat latencies
		errs      atomic.Int64
		firstErr  atomic.Value
		wg        sync.WaitGroup
		next      atomic.Int64
	)
	start := time.Now()
	for range submitters {
		wg.Add(1)
		go func() {
			defer wg.Done()
			var mine, mineSubmit latencies
			var waits sync.WaitGroup
			var lmu sync.Mutex
			for next.Add(1) <= int64(tasks) {
				t0 := time.Now()
				f, err := bq.submit.Submit(ctx, payload64)
				mineSubmit = append(mineSubmit, time.Since(t0))
				if err != nil {
					errs.Add(1)
					firstErr.CompareAndSwap(nil, err)
					continue
				}
				waits.Add(1)
				go func() {
					defer waits.Done()
					if _, err := f.Wait(ctx); err != nil {
						errs.Add(1)
						firstErr.CompareAndSwap(nil, err)
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
	elapsed := time.Since(start)
	cpu.perTask(ctx, r, tasks)
	if e := firstErr.Load(); e != nil {
		fmt.Fprintf(b.stderr, "scenario %s: %d errors, first: %v\n", strings.ToUpper(name), errs.Load(), e)
	}
	r.set("tasks", float64(tasks))
	r.set("tasks_per_s", float64(tasks-int(errs.Load()))/elapsed.Seconds())
	r.set("tasks_per_raw_xadd", r.Metrics["tasks_per_s"]/b.rawRate)
	r.setMs("submit_p50_ms", submitLat.pct(50))
	r.setMs("submit_p99_ms", submitLat.pct(99))
	r.setMs("result_p50_ms", lat.pct(50))
	r.setMs("result_p99_ms", lat.pct(99))
	r.set("errors", float64(errs.Load()))
	return r, nil
}

// submitAll submits n tasks of 64 bytes from as many goroutines, and
// returns their futures; it stops at the first error.
func submitAll(ctx context.Context, q *queue.Queue, n, goroutines int, opts ...queue.SubmitOption) ([]*queue.Future, error) {
	var (
		mu       sync.Mutex
		futures  []*queue.Future
		wg       sync.WaitGroup
		next     atomic.Int64
		firstErr atomic.Value
	)
	for range goroutines {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for next.Add(1) <= int64(n) {
				f, err := q.Submit(ctx, payload64, opts...)
				if err != nil {
					firstErr.CompareAndSwap(nil, err)
					return
				}
				mu.Lock()
				futures = append(futures, f)
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	if e := firstErr.Load(); e != nil {
		return nil, e.(error)
	}
	return futures, nil
}

// scenarioQueueLatency is T2: one submitter, 2,000 sequential Submit →
// Wait round trips on the same queue as T1.
func scenarioQueueLatency(ctx context.Context, b *bench, _ int) (result, error) {
	r := newResult()
	tasks := b.scaled(2000, 20)
	bq, err := b.newQueue(ctx, "t2", 2, 4, noop)
	if err != nil {
		return r, err
	}
	defer bq.close()
	var lat latencies
	cpu := b.startCPU(ctx)
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

// scenarioQueueMemory is TM: Redis memory per waiting task (64-byte
// payload) and per retained outcome, at 1,000, 10,000 and 100,000 tasks.
func scenarioQueueMemory(ctx context.Context, b *bench, _ int) (result, error) {
	r := newResult()
	for _, n := range []int{b.scaled(1000, 10), b.scaled(10000, 100), b.scaled(100000, 1000)} {
		if err := b.settleMemory(ctx); err != nil {
			return r, err
		}
		bq, err := b.newQueue(ctx, "tm", 0, 0, nil, queue.WithMaxQueued(max(n, queue.DefaultMaxQueued)))
		if err != nil {
			return r, err
		}
		before, err := b.usedMemory(ctx)
		if err != nil {
			bq.close()
			return r, err
		}
		cpu := b.startCPU(ctx)
		futures, err := submitAll(ctx, bq.submit, n, 32)
		if err != nil {
			bq.close()
			return r, err
		}
		waiting, err := b.usedMemory(ctx)
		if err != nil {
			bq.close()
			return r, err
		}
		if _, err := bq.submit.Serve(noop, queue.WithWorkers(8)); err != nil {
			bq.close()
			return r, err
		}
		for _, f := range futures {
			if _, err := f.Wait(ctx); err != nil {
				bq.close()
				return r, err
			}
		}
		cpu.per(ctx, r, fmt.Sprintf("redis_cpu_us_per_task_%d", n), n)
		done, err := b.usedMemory(ctx)
		bq.close()
		if err != nil {
			return r, err
		}
		r.set(fmt.Sprintf("bytes_per_waiting_task_%d", n), float64(waiting-before)/float64(n))
		r.set(fmt.Sprintf("bytes_per_outcome_%d", n), float64(done-before)/float64(n))
	}
	return r, nil
}
