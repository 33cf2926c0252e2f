package main

import (
	"context"
	"fmt"
	"time"
)

// scenarioThroughput is scenario A: two nodes of 4 workers, a client-only
// node, 64 producers dispatching 20,000 distinct keys.
func scenarioThroughput(ctx context.Context, b *bench, _ int) (result, error) {
	return b.dispatchScenario(ctx, "a", b.scaled(20000, 100), 64)
}

// scenarioLatency is scenario B: the same topology, one producer, 2,000
// sequential dispatches.
func scenarioLatency(ctx context.Context, b *bench, _ int) (result, error) {
	return b.dispatchScenario(ctx, "b", b.scaled(2000, 20), 1)
}

func (b *bench) dispatchScenario(ctx context.Context, name string, jobs, producers int) (result, error) {
	r := newResult()
	p, err := b.newPool(ctx, name, 2, 4)
	if err != nil {
		return r, err
	}
	cpu := b.startCPU(ctx)
	st := dispatch(ctx, p.client, 0, jobs, producers)
	cpu.per(ctx, r, "redis_cpu_us_per_job", jobs-st.errors)
	if st.err != nil {
		fmt.Fprintf(b.stderr, "scenario %s: %d dispatch errors, first: %v\n", name, st.errors, st.err)
	}
	// Every DispatchJob returned after its Start ran; wait only for the
	// log to show it, so that a lost start shows as an error here.
	if err := p.log.waitFor(ctx, 30*time.Second, func() bool { return len(p.log.first) >= jobs-st.errors }); err != nil {
		_ = p.close(ctx)
		return r, fmt.Errorf("waiting for starts: %w", err)
	}
	starts := p.startLatencies(0, st)
	r.set("jobs", float64(jobs))
	r.set("jobs_per_s", float64(jobs-st.errors)/st.elapsed.Seconds())
	r.setMs("dispatch_p50_ms", st.lat.pct(50))
	r.setMs("dispatch_p99_ms", st.lat.pct(99))
	r.setMs("dispatch_max_ms", st.lat.pct(100))
	r.setMs("start_p50_ms", starts.pct(50))
	r.setMs("start_p99_ms", starts.pct(99))
	r.set("errors", float64(st.errors))
	r.set("duplicate_starts", float64(p.log.duplicates()))
	took, err := p.shutdown(ctx)
	if err != nil {
		return r, fmt.Errorf("shutdown: %w", err)
	}
	r.setMs("shutdown_ms", took)
	return r, nil
}
