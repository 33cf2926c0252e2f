package main

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/shepherd-go/shepherd/limit"
	"github.com/shepherd-go/shepherd/queue"
)

// The adaptive concurrency scenarios: T6, a queue's limit against a
// downstream of hidden capacity; T6P, live and batch partitions of a
// shared limit.

// t6Base is the simulated downstream's latency below its capacity.
const t6Base = 10 * time.Millisecond

// t6Workers is the workers a process has in T6 and T6P: more than the
// downstream can take.
const t6Workers = 64

// scenarioLimitFollows is T6: for a downstream capacity of 8 and of 32,
// fixed concurrencies c/2, c and 2c (one process with that many
// workers), then a process with 64 workers and WithConcurrencyLimit's
// default (Gradient2 from 1): how long its limit takes to settle within
// ±30% of c (to stay there for 3s) and the share of the time it stays
// there afterwards, its throughput against the best fixed one and its p99
// against the no-load p99 (at c/2) over the second half of the phase;
// then the capacity halves and how long the limit takes to follow.
func scenarioLimitFollows(ctx context.Context, b *bench, _ int) (result, error) {
	res := newResult()
	phase := time.Duration(b.scaled(20000, 300)) * time.Millisecond
	fixedPhase := phase / 4
	var cpuUsed float64 // over the adaptive phases' second halves
	var cpuTasks int
	cpuOK := true
	for _, c := range []int{8, 32} {
		p := fmt.Sprintf("c%d_", c)
		best, noLoadP99 := 0.0, time.Duration(0)
		for _, n := range []int{c / 2, c, 2 * c} {
			d := newDownstream(c)
			r := &t6Run{errs: make(chan error, 16)}
			if _, err := b.serveAgainst(ctx, r, d, "f", queue.WithWorkers(n)); err != nil {
				return res, errors.Join(err, r.stop())
			}
			t0 := time.Now()
			if err := sleepCtx(ctx, fixedPhase); err != nil {
				return res, errors.Join(err, r.stop())
			}
			from, to := t0.Add(fixedPhase/2), time.Now()
			w := d.window(from, to, "")
			if err := r.stop(); err != nil {
				return res, err
			}
			tput := rate(w, from, to)
			res.set(fmt.Sprintf("%sfixed_%d_per_s", p, n), tput)
			best = max(best, tput)
			if n == c/2 {
				noLoadP99 = w.pct(99)
			}
		}
		res.setMs(p+"noload_p99_ms", noLoadP99)

		d := newDownstream(c)
		r := &t6Run{errs: make(chan error, 16)}
		s, err := b.serveAgainst(ctx, r, d, "a", queue.WithWorkers(t6Workers), queue.WithConcurrencyLimit(nil, 1))
		if err != nil {
			return res, errors.Join(err, r.stop())
		}
		sctx, stopSampling := context.WithCancel(ctx)
		samples := sampleLimit(sctx, s)
		t0 := time.Now()
		// Redis's CPU over the phase's second half, where the backlog
		// stays 1,024 deep: as many tasks are submitted and taken as
		// finish, so CPU ÷ tasks finished is the cost of a whole task.
		err = sleepCtx(ctx, phase/2)
		cpu, cpuFrom := b.startCPU(ctx), time.Now()
		if err == nil {
			err = sleepCtx(ctx, phase-phase/2)
		}
		used, cpuErr := cpu.used(ctx)
		t1 := time.Now()
		d.capacity.Store(int64(c / 2))
		if err == nil {
			err = sleepCtx(ctx, phase)
		}
		stopSampling()
		t2 := time.Now()
		if err := errors.Join(err, r.stop()); err != nil {
			return res, err
		}
		all := samples()
		var first, second []limitSample
		for _, s := range all {
			if s.at.Before(t1) {
				first = append(first, s)
			} else {
				second = append(second, s)
			}
		}
		hold := min(3*time.Second, phase/4)
		setSettle := func(name string, samples []limitSample, from time.Time, target float64) {
			d, inBand := settledAt(samples, from, target, hold)
			res.set(name+"settle_s", d.Seconds())
			if d < 0 {
				res.set(name+"settle_s", -1)
			}
			res.set(name+"in_band_after_settle", inBand)
		}
		setSettle(p, first, t0, float64(c))
		setSettle(p+"halved_", second, t1, float64(c)/2)
		mid := t0.Add(phase / 2)
		w := d.window(mid, t1, "")
		res.set(p+"throughput_of_best_fixed", rate(w, mid, t1)/best)
		res.set(p+"p99_of_noload", float64(w.pct(99))/float64(noLoadP99))
		res.set(p+"limit_median", float64(medianLimit(first, mid)))
		if n := len(d.window(cpuFrom, t1, "")); cpuErr == nil && n > 0 {
			res.set(p+"redis_cpu_us_per_task", used*1e6/float64(n))
			cpuUsed, cpuTasks = cpuUsed+used, cpuTasks+n
		} else {
			cpuOK = false
		}
		mid2 := t1.Add(phase / 2)
		w2 := d.window(mid2, t2, "")
		res.set(p+"halved_throughput_of_capacity", rate(w2, mid2, t2)/(float64(c/2)/t6Base.Seconds()))
		res.set(p+"halved_p99_of_noload", float64(w2.pct(99))/float64(noLoadP99))
		res.set(p+"halved_limit_median", float64(medianLimit(second, mid2)))
	}
	if cpuOK {
		res.set("redis_cpu_us_per_task", cpuUsed*1e6/float64(cpuTasks))
	}
	return res, nil
}

// medianLimit is the median limit of the samples from from on.
func medianLimit(samples []limitSample, from time.Time) int {
	var ls []int
	for _, s := range samples {
		if !s.at.Before(from) {
			ls = append(ls, s.limit)
		}
	}
	if len(ls) == 0 {
		return 0
	}
	slices.Sort(ls)
	return ls[len(ls)/2]
}

// scenarioLimitPartitions is T6P: two queues, live and batch, 64
// workers each, share one Limit (live 0.9, batch 0.1, the default
// Gradient2) against one downstream of capacity 32. Batch keeps a
// backlog (it asks for all the capacity); live is offered 80% of the
// capacity: together twice the capacity. How much of what it asks live
// gets (second half of a 20s phase), and its p99 against the
// downstream's base latency; then live goes idle and how much of the
// capacity batch gets alone (second half of another 20s).
func scenarioLimitPartitions(ctx context.Context, b *bench, _ int) (result, error) {
	res := newResult()
	const c = 32
	phase := time.Duration(b.scaled(20000, 300)) * time.Millisecond
	capacity := float64(c) / t6Base.Seconds()
	l, err := queue.NewLimit(nil, limit.WithPartition("live", 0.9), limit.WithPartition("batch", 0.1))
	if err != nil {
		return res, err
	}
	d := newDownstream(c)
	r := &t6Run{errs: make(chan error, 16)}
	if _, err := b.serveAgainst(ctx, r, d, "batch", queue.WithWorkers(t6Workers), queue.WithLimit(l, "batch")); err != nil {
		return res, errors.Join(err, r.stop())
	}
	// live: a queue fed at a fixed rate.
	bq, err := b.newQueueServing(ctx, "t6live", 0, nil, nil)
	if err != nil {
		return res, errors.Join(err, r.stop())
	}
	r.bqs = append(r.bqs, bq)
	q, err := queue.Open(ctx, b.client(128), bq.name)
	if err != nil {
		return res, errors.Join(err, r.stop())
	}
	bq.handles = append(bq.handles, q)
	ls, err := q.Serve(func(ctx context.Context, t *queue.Task) ([]byte, error) {
		return nil, d.call(ctx, "live")
	}, queue.WithWorkers(t6Workers), queue.WithLimit(l, "live"))
	if err != nil {
		return res, errors.Join(err, r.stop())
	}
	sctx, stopSampling := context.WithCancel(ctx)
	defer stopSampling()
	samples := sampleLimit(sctx, ls)
	asked := 0.8 * capacity
	lctx, stopLive := context.WithCancel(ctx)
	liveErr := make(chan error, 1)
	go func() { liveErr <- offer(lctx, bq.submit, "live", asked) }()
	t0 := time.Now()
	// Redis's CPU over the first phase's second half: live's rate and
	// batch's backlog are steady, so as many tasks are submitted and
	// taken as finish, and CPU ÷ tasks finished is the cost of a whole
	// task.
	err = sleepCtx(ctx, phase/2)
	cpu, cpuFrom := b.startCPU(ctx), time.Now()
	if err == nil {
		err = sleepCtx(ctx, phase-phase/2)
	}
	used, cpuErr := cpu.used(ctx)
	cpuTo := time.Now()
	stopLive()
	err = errors.Join(err, <-liveErr)
	t1 := time.Now()
	if err == nil {
		err = sleepCtx(ctx, phase)
	}
	t2 := time.Now()
	if err := errors.Join(err, r.stop()); err != nil {
		return res, err
	}
	mid := t0.Add(phase / 2)
	live, batch := d.window(mid, t1, "live"), d.window(mid, t1, "batch")
	res.set("live_asked_per_s", asked)
	res.set("live_share_of_asked", rate(live, mid, t1)/asked)
	res.set("batch_with_live_of_capacity", rate(batch, mid, t1)/capacity)
	res.setMs("live_p99_ms", live.pct(99))
	res.setMs("base_ms", t6Base)
	mid2 := t1.Add(phase / 2)
	alone := d.window(mid2, t2, "batch")
	res.set("batch_alone_of_capacity", rate(alone, mid2, t2)/capacity)
	if n := len(d.window(cpuFrom, cpuTo, "")); cpuErr == nil && n > 0 {
		res.set("redis_cpu_us_per_task", used*1e6/float64(n))
	}
	all := samples()
	res.set("limit_median_with_live", float64(medianLimit(all, mid)))
	res.set("limit_median_alone", float64(medianLimit(all, mid2)))
	return res, nil
}
