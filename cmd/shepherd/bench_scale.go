package main

import (
	"context"
	"fmt"
	"runtime"
	"time"
)

// scenarioScale is scenario E: 100,000 running jobs over 16 workers (two
// nodes of 8). It reports Redis memory per running job, the process's
// RSS (every node of the pool lives in this process), and the dispatch
// throughput of a batch of 1,000 jobs into an empty pool versus into a
// pool that already runs 99,000.
func scenarioScale(ctx context.Context, b *bench, _ int) (result, error) {
	r := newResult()
	jobs := b.scaled(100000, 1000)
	batch := min(1000, jobs/10)
	runtime.GC()
	if err := b.settleMemory(ctx); err != nil {
		return r, err
	}
	memBefore, err := b.usedMemory(ctx)
	if err != nil {
		return r, err
	}
	p, err := b.newPool(ctx, "e", 2, 8)
	if err != nil {
		return r, err
	}
	defer p.close(ctx)
	small := dispatch(ctx, p.client, 0, batch, 64)
	fill := dispatch(ctx, p.client, batch, jobs-batch, 64)
	large := dispatch(ctx, p.client, jobs-batch, jobs, 64)
	errs := small.errors + fill.errors + large.errors
	if errs > 0 {
		return r, fmt.Errorf("%d dispatch errors, first: %v", errs, firstErr(small.err, fill.err, large.err))
	}
	memAfter, err := b.usedMemory(ctx)
	if err != nil {
		return r, err
	}
	atSmall := float64(batch) / small.elapsed.Seconds()
	atLarge := float64(batch) / large.elapsed.Seconds()
	r.set("jobs", float64(jobs))
	r.set("redis_bytes_per_job", float64(memAfter-memBefore)/float64(jobs))
	r.set("node_rss_bytes", float64(processRSS()))
	r.set("jobs_per_s", atLarge)
	r.set("jobs_per_s_empty_pool", atSmall)
	r.set("throughput_full_vs_empty", atLarge/atSmall)
	r.set("fill_jobs_per_s", float64(jobs-2*batch)/fill.elapsed.Seconds())
	r.set("errors", float64(errs))
	r.set("duplicate_starts", float64(p.log.duplicates()))
	// Control calls at this size: remove the oldest worker (its ~1/16 of
	// the jobs move), then close a whole node (half the jobs move).
	begin := time.Now()
	if err := p.nodes[0].RemoveWorker(ctx, p.workers[0]); err != nil {
		return r, fmt.Errorf("remove worker: %w", err)
	}
	r.setMs("remove_worker_ms", time.Since(begin))
	// Workers were added round-robin over the two nodes: odd ones are
	// node 1's.
	p.log.mu.Lock()
	waiting := map[string]bool{}
	for k, w := range p.log.owner {
		if w%2 == 1 {
			waiting[k] = true
		}
	}
	seen := len(p.log.events)
	p.log.mu.Unlock()
	begin = time.Now()
	if err := p.nodes[1].Close(ctx); err != nil {
		return r, fmt.Errorf("close node: %w", err)
	}
	r.setMs("close_ms", time.Since(begin))
	// How long until every job of the closed node started on the other.
	var last time.Time
	err = p.log.waitFor(ctx, 60*time.Second, func() bool {
		for _, e := range p.log.events[seen:] {
			if !e.stop && e.worker%2 == 0 && waiting[e.key] {
				delete(waiting, e.key)
				last = e.at
			}
		}
		seen = len(p.log.events)
		return len(waiting) == 0
	})
	if err != nil {
		return r, fmt.Errorf("waiting for the closed node's jobs: %w", err)
	}
	r.setMs("closed_jobs_elsewhere_ms", last.Sub(begin))
	took, err := p.shutdown(ctx)
	if err != nil {
		return r, fmt.Errorf("shutdown: %w", err)
	}
	r.setMs("shutdown_ms", took)
	return r, nil
}

func firstErr(errs ...error) error {
	for _, err := range errs {
		if err != nil {
			return err
		}
	}
	return nil
}
