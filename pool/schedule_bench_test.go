package pool

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"strconv"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/shepherd-go/shepherd/internal/redistest"
)

// BenchmarkScheduleApply measures what applying a plan costs, on a
// private Redis: a first plan of K new keys (all dispatched), the same
// plan again (the diff alone: what a schedule pays every interval while
// nothing changes), and a plan with a tenth of the keys replaced (a
// tenth stopped, a tenth started). It reports wall time and Redis CPU
// per key of the plan for each. Run it alone:
// go test -run '^$' -bench ScheduleApply -benchtime 1x ./pool/
// (SHEPHERD_PLAN_KEYS=K, default 10,000).
func BenchmarkScheduleApply(b *testing.B) {
	k := 10000
	if v, err := strconv.Atoi(os.Getenv("SHEPHERD_PLAN_KEYS")); err == nil && v > 0 {
		k = v
	}
	srv := redistest.Start(b)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	rdb := srv.Client()
	for range b.N {
		name := redistest.Name(b)
		n, err := AddNode(ctx, rdb, name, WithLogger(slog.New(slog.DiscardHandler)))
		if err != nil {
			b.Fatal(err)
		}
		for range 4 {
			if _, err := n.AddWorker(ctx, nopJobs{}); err != nil {
				b.Fatal(err)
			}
		}
		p := &planner{n: n, name: "bench", cfg: scheduleConfig{rate: 1_000_000, conc: 64}, logger: n.logger, tokens: make([]string, 1)}
		inc, err := n.run(ctx, createScheduleScript, "schedule", []string{n.lay.plan("bench"), n.lay.plans}, "bench", int64(3_600_000), newID())
		if err != nil {
			b.Fatal(err)
		}
		p.inc = fmt.Sprint(inc)
		res, err := p.hold(ctx)
		if err != nil || res.state != "HELD" {
			b.Fatal(res, err)
		}
		p.token = res.token
		plan := func(from, to int) *JobPlan {
			jp := &JobPlan{StopOthers: true}
			for i := from; i < to; i++ {
				jp.Jobs = append(jp.Jobs, PlannedJob{Key: "device-" + strconv.Itoa(i), Payload: []byte("config-v1")})
			}
			return jp
		}
		// The baseline: the same number of DispatchJob calls by hand, 64 at
		// a time, on keys of their own.
		cpu0, t0 := cpuOf(b, rdb), time.Now()
		sem := make(chan struct{}, 64)
		errs := make(chan error, k)
		for i := range k {
			sem <- struct{}{}
			go func() {
				defer func() { <-sem }()
				errs <- n.DispatchJob(ctx, "by-hand-"+strconv.Itoa(i), []byte("config-v1"))
			}()
		}
		for range k {
			if err := <-errs; err != nil {
				b.Fatal(err)
			}
		}
		took, cpu := time.Since(t0), cpuOf(b, rdb)-cpu0
		b.ReportMetric(float64(took.Microseconds())/float64(k), "by_hand_us/key")
		b.ReportMetric(cpu*1e6/float64(k), "by_hand_redis_us/key")
		for _, step := range []struct {
			name string
			plan *JobPlan
		}{
			{"first", plan(0, k)},
			{"unchanged", plan(0, k)},
			{"tenth_replaced", plan(k/10, k+k/10)},
		} {
			cpu0, t0 := cpuOf(b, rdb), time.Now()
			out := p.apply(ctx, step.plan)
			took, cpu := time.Since(t0), cpuOf(b, rdb)-cpu0
			if out.err != "" || out.failed > 0 {
				b.Fatalf("%s: %+v", step.name, out)
			}
			b.ReportMetric(float64(took.Microseconds())/float64(k), step.name+"_us/key")
			b.ReportMetric(cpu*1e6/float64(k), step.name+"_redis_us/key")
			b.Logf("%s: %d keys, started %d, stopped %d, %v, Redis CPU %.0f ms", step.name, k, out.started, out.stopped, took, cpu*1000)
		}
		if err := n.Shutdown(ctx); err != nil {
			b.Fatal(err)
		}
	}
}

type nopJobs struct{}

func (nopJobs) Start(context.Context, *Job) error  { return nil }
func (nopJobs) Stop(context.Context, string) error { return nil }

// cpuOf is Redis's CPU time so far (redistest.CPU).
func cpuOf(b *testing.B, rdb redis.UniversalClient) float64 {
	v, err := redistest.CPU(context.Background(), rdb)
	if err != nil {
		b.Fatal(err)
	}
	return v
}
