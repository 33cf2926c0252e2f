package main

import (
	"context"
	"fmt"
	"time"
)

// scenarioMovement is scenario D: one node with 8 workers and 10,000
// jobs; RemoveWorker the oldest worker, then count the keys that moved
// between surviving workers and time the removed worker's jobs.
func scenarioMovement(ctx context.Context, b *bench, _ int) (result, error) {
	r := newResult()
	jobs := b.scaled(10000, 100)
	p, err := b.newPool(ctx, "d", 1, 8)
	if err != nil {
		return r, err
	}
	defer p.close(ctx)
	st := dispatch(ctx, p.client, 0, jobs, 64)
	if st.err != nil {
		return r, fmt.Errorf("dispatch: %d errors, first: %w", st.errors, st.err)
	}
	p.log.mu.Lock()
	before := make(map[string]int, len(p.log.owner))
	for k, w := range p.log.owner {
		before[k] = w
	}
	mark := len(p.log.events)
	p.log.mu.Unlock()

	begin := time.Now()
	if err := p.nodes[0].RemoveWorker(ctx, p.workers[0]); err != nil {
		return r, fmt.Errorf("remove worker: %w", err)
	}
	removeTook := time.Since(begin)
	// Done when each of the removed worker's keys runs on another worker.
	err = p.log.waitFor(ctx, 60*time.Second, func() bool {
		for k, w := range before {
			if w == 0 {
				if now, ok := p.log.owner[k]; !ok || now == 0 {
					return false
				}
			}
		}
		return true
	})
	if err != nil {
		return r, fmt.Errorf("waiting for the removed worker's jobs: %w", err)
	}
	p.log.mu.Lock()
	var last time.Time
	moved := map[string]bool{}
	for _, e := range p.log.events[mark:] {
		if e.stop {
			continue
		}
		if before[e.key] == 0 {
			last = e.at
		} else if e.worker != before[e.key] {
			moved[e.key] = true
		}
	}
	survivors := 0
	for _, w := range before {
		if w != 0 {
			survivors++
		}
	}
	p.log.mu.Unlock()

	r.set("jobs", float64(jobs))
	r.set("survivor_keys", float64(survivors))
	r.set("moved_survivor_keys", float64(len(moved)))
	r.setMs("removed_jobs_elsewhere_ms", last.Sub(begin))
	r.setMs("remove_worker_ms", removeTook)
	took, err := p.shutdown(ctx)
	if err != nil {
		return r, fmt.Errorf("shutdown: %w", err)
	}
	r.setMs("shutdown_ms", took)
	return r, nil
}
