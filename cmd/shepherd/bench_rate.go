package main

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/shepherd-go/shepherd/queue"
)

// trRate is TR's rate limit: 500 starts a second, with the default burst
// (N/50 = 10).
var trRate = queue.Rate{N: 500, Per: time.Second}

// scenarioRateLimit is TR: one tenant limited to 500 starts/s (trRate)
// with a backlog of 20,000 tasks, served by 2 queue handles × 4 idle
// workers (no-op handlers), as T1's. It measures over the first 10,000
// starts only (20 s at 500/s), so that the backlog never runs dry while it
// measures and the scenario stays near 20 s; then it stops. From the
// handlers' start times (this process's clock): rate_per_s, the starts
// over the time from the first to the last, and max_window_per_s, the
// most starts within any 1 s; and Redis's CPU (INFO cpu, user + sys) over
// the same span per start.
func scenarioRateLimit(ctx context.Context, b *bench, _ int) (result, error) {
	r := newResult()
	backlog := b.scaled(20000, 200)
	measured := b.scaled(10000, 100)
	bq, err := b.newQueue(ctx, "tr", 0, 0, nil)
	if err != nil {
		return r, err
	}
	defer bq.close()
	const tenant = "t"
	if err := bq.submit.SetTenant(ctx, tenant, 8); err != nil {
		return r, err
	}
	if err := bq.submit.SetTenantRate(ctx, tenant, trRate); err != nil {
		return r, err
	}
	if _, err := submitAll(ctx, bq.submit, backlog, 16, queue.WithTenant(tenant)); err != nil {
		return r, err
	}

	starts := make([]time.Time, measured)
	var (
		n    atomic.Int64
		once sync.Once
		done = make(chan struct{})
	)
	h := func(context.Context, *queue.Task) ([]byte, error) {
		now := time.Now()
		if i := n.Add(1) - 1; i < int64(measured) {
			starts[i] = now
			if i == int64(measured)-1 {
				once.Do(func() { close(done) })
			}
		}
		return nil, nil
	}
	cpu := b.startCPU(ctx)
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
	// The rate alone paces the starts: twice the time it allows, and
	// some, is a hang.
	wait := 2*time.Duration(measured)*trRate.Per/time.Duration(trRate.N) + 10*time.Second
	select {
	case <-done:
	case <-time.After(wait):
		return r, fmt.Errorf("%d of %d starts after %v", n.Load(), measured, wait)
	case <-ctx.Done():
		return r, ctx.Err()
	}
	cpu.perTask(ctx, r, measured)
	// A handler that took an index below the last may still be writing
	// it: Close returns once every worker has returned, which also makes
	// their writes visible here.
	for _, q := range bq.handles {
		_ = q.Close(ctx)
	}
	bq.handles = nil
	slices.SortFunc(starts, func(a, b time.Time) int { return a.Compare(b) })
	span := starts[len(starts)-1].Sub(starts[0])
	r.set("tasks_backlog", float64(backlog))
	r.set("starts_measured", float64(measured))
	r.set("rate_limit_per_s", float64(trRate.N)/trRate.Per.Seconds())
	r.set("burst", float64(trRate.EffectiveBurst()))
	r.set("rate_per_s", float64(measured-1)/span.Seconds())
	r.set("max_window_per_s", float64(maxInWindow(starts, time.Second)))
	return r, nil
}

// maxInWindow returns the most of the sorted times that fall within any
// window [t, t+w).
func maxInWindow(sorted []time.Time, w time.Duration) int {
	best, j := 0, 0
	for i := range sorted {
		for j < len(sorted) && sorted[j].Sub(sorted[i]) < w {
			j++
		}
		best = max(best, j-i)
	}
	return best
}
