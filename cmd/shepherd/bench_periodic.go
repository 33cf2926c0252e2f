package main

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/shepherd-go/shepherd/queue"
)

// TP: periodic tasks.
const (
	tpSchedules = 1000
	tpWindow    = 20 * time.Second
	tpProcs     = 3
)

// scenarioPeriodic is TP: 1,000 schedules "@every 1s", set 1/1000 s
// apart (so that their ticks spread over each second), served by 3
// processes × 8 workers for 20 s (scaled, at least 2 s), a no-op
// handler. Every tick of the window must run once (its task kept 5 s after it finishes, so that the
// schedule's last tick, not the task's id, is what stops a second
// enqueue): ticks_missed and ticks_twice count the failures (both must
// be 0), tick_late_* how late a tick's task started after its time, and
// redis_cpu_us_per_task Redis's CPU time per task (the three schedulers
// and the workers together).
func scenarioPeriodic(ctx context.Context, b *bench, _ int) (result, error) {
	r := newResult()
	n := b.scaled(tpSchedules, 10)
	window := max(time.Duration(float64(tpWindow)*b.cfg.scale), 2*time.Second)
	var (
		mu     sync.Mutex
		starts = map[string]time.Time{} // task id → its first attempt's start, local clock
		firsts = map[string]int{}       // task id → first attempts
	)
	h := func(_ context.Context, t *queue.Task) ([]byte, error) {
		now := time.Now()
		if t.Attempt == 1 {
			mu.Lock()
			if firsts[t.ID]++; firsts[t.ID] == 1 {
				starts[t.ID] = now
			}
			mu.Unlock()
		}
		return nil, nil
	}
	bq, err := b.newQueue(ctx, "tp", tpProcs, 8, h)
	if err != nil {
		return r, err
	}
	defer bq.close()
	// Redis's clock against this process's: ticks are on Redis's.
	t0 := time.Now()
	rnow, err := b.rdb.Time(ctx).Result()
	if err != nil {
		return r, err
	}
	offset := rnow.Sub(t0.Add(time.Since(t0) / 2)) // Redis minus local
	setStart := time.Now()
	for i := range n {
		name := fmt.Sprintf("tp-%05d", i)
		if err := bq.submit.SetSchedule(ctx, name, "@every 1s", nil,
			queue.WithTaskOptions(queue.WithRetention(5*time.Second))); err != nil {
			return r, err
		}
		if d := time.Until(setStart.Add(time.Duration(i+1) * time.Second / time.Duration(n))); d > 0 {
			time.Sleep(d) // spreading the anchors over a second
		}
	}
	from := time.Now().Add(offset).Add(2 * time.Second) // Redis's clock
	to := from.Add(window)
	if err := sleepCtx(ctx, time.Until(from.Add(-offset))); err != nil {
		return r, err
	}
	cpu := b.startCPU(ctx)
	if err := sleepCtx(ctx, window); err != nil {
		return r, err
	}
	cpu.perTask(ctx, r, inWindow(&mu, starts, from.Add(-offset), to.Add(-offset)))
	schedules, err := bq.submit.Schedules(ctx)
	if err != nil {
		return r, err
	}
	// The window's last ticks start within a second, or count as missed.
	if err := sleepCtx(ctx, time.Second); err != nil {
		return r, err
	}
	for _, q := range bq.handles {
		_ = q.Close(ctx)
	}
	mu.Lock()
	defer mu.Unlock()
	var late latencies
	expected, missed, twice := 0, 0, 0
	for _, s := range schedules {
		for at := s.Created.Add(time.Second); at.Before(to); at = at.Add(time.Second) {
			if at.Before(from) {
				continue
			}
			expected++
			id := s.Name + "@" + at.UTC().Format("2006-01-02T15:04:05.000Z")
			st, ok := starts[id]
			if !ok {
				missed++
				continue
			}
			late = append(late, st.Add(offset).Sub(at))
		}
	}
	for _, c := range firsts {
		if c > 1 {
			twice++
		}
	}
	inCPU := inWindowLocked(starts, from.Add(-offset), to.Add(-offset))
	r.set("schedules", float64(n))
	r.set("processes", tpProcs)
	r.set("ticks_expected", float64(expected))
	r.set("ticks_missed", float64(missed))
	r.set("ticks_twice", float64(twice))
	r.set("tasks_per_s", float64(inCPU)/window.Seconds())
	r.setMs("tick_late_p50_ms", late.pct(50))
	r.setMs("tick_late_p99_ms", late.pct(99))
	r.setMs("tick_late_max_ms", late.pct(100))
	return r, nil
}

// inWindow counts the tasks that started in [from, to) (local clock).
func inWindow(mu *sync.Mutex, starts map[string]time.Time, from, to time.Time) int {
	mu.Lock()
	defer mu.Unlock()
	return inWindowLocked(starts, from, to)
}

func inWindowLocked(starts map[string]time.Time, from, to time.Time) int {
	n := 0
	for _, st := range starts {
		if !st.Before(from) && st.Before(to) {
			n++
		}
	}
	return n
}
