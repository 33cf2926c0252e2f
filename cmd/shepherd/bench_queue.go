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

	"github.com/shepherd-go/shepherd/internal/redisutil"
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
	clients []redis.UniversalClient
}

func (b *bench) newQueue(ctx context.Context, scenario string, procs, workers int, h queue.Handler, opts ...queue.Option) (*benchQueue, error) {
	return b.newQueueServing(ctx, scenario, procs, h, opts, queue.WithWorkers(workers))
}

// newQueueServing is newQueue with serve options.
func (b *bench) newQueueServing(ctx context.Context, scenario string, procs int, h queue.Handler, opts []queue.Option, serve ...queue.ServeOption) (*benchQueue, error) {
	return openBenchQueue(ctx, benchQueueName(scenario), procs, func() redis.UniversalClient { return b.client(128) }, h, opts, serve...)
}

// benchQueueName returns a new queue name for scenario, unique to the run.
func benchQueueName(scenario string) string {
	return fmt.Sprintf("bench-%s-%d-%d", scenario, time.Now().UnixNano(), queueSeq.Add(1))
}

// openBenchQueue opens the queue name: procs serving handles and a
// submit-only one, each on a client of its own from newClient.
func openBenchQueue(ctx context.Context, name string, procs int, newClient func() redis.UniversalClient, h queue.Handler, opts []queue.Option, serve ...queue.ServeOption) (*benchQueue, error) {
	bq := &benchQueue{name: name}
	openOne := func() (*queue.Queue, error) {
		c := newClient()
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

// close closes every handle and deletes the queue's keys: those of its
// first hash tag and of its shards' (NAME#1, NAME#2...), on every master
// of a cluster.
func (bq *benchQueue) close() {
	ctx := context.Background()
	for _, q := range bq.handles {
		_ = q.Close(ctx)
	}
	if len(bq.clients) > 0 {
		unlinkMatching(ctx, bq.clients[0], queueKeyPatterns(bq.name)...)
	}
	for _, c := range bq.clients {
		_ = c.Close()
	}
}

// unlinkMatching unlinks the keys that match patterns, on every master of
// a cluster (through a cluster client a SCAN sees one node). Errors are
// ignored: it cleans up after a measurement.
func unlinkMatching(ctx context.Context, rdb redis.UniversalClient, patterns ...string) {
	for _, pattern := range patterns {
		_ = redisutil.UnlinkMatching(ctx, rdb, pattern)
	}
}

func noop(context.Context, *queue.Task) ([]byte, error) { return nil, nil }

var payload64 = make([]byte, 64)

// scenarioQueueThroughput is T1: 2 processes × 4 workers, 64 submitters,
// 20,000 tasks of 64 bytes, a no-op handler: tasks/s from the first
// Submit until the last future completed, and Submit → result latency.
// T1P is the same with serve options (WithPrefetch).
func scenarioQueueThroughput(ctx context.Context, b *bench, name string, serve ...queue.ServeOption) (result, error) {
	return b.queueThroughput(ctx, b.target(), name, nil, serve...)
}

// queueTarget is the Redis a T1- or T2-shaped measurement runs on:
// clients for the queue's handles, and one that reads its CPU.
type queueTarget struct {
	newClient func() redis.UniversalClient
	info      *redis.Client
}

// target is the bench's own Redis.
func (b *bench) target() queueTarget {
	return queueTarget{newClient: func() redis.UniversalClient { return b.client(128) }, info: b.rdb}
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
