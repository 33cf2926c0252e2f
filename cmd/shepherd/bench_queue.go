package main

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/shepherd-go/shepherd/internal/redisutil"
	"github.com/shepherd-go/shepherd/queue"
)

// The queue's scenarios: T1 throughput (T1P with WithPrefetch), T2 latency, T3 delayed tasks due
// at once, T4 recovery after SIGKILL, TM Redis memory per task.

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
