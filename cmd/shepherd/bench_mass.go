package main

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/shepherd-go/shepherd/pool"
)

// Scenario M's shape.
const (
	massProcs     = 8 // worker processes
	massWorkers   = 2 // workers in each
	massProducers = 4 // client-only nodes dispatching
	massCalls     = 64
)

// massLog follows scenario M's Starts, reported by the worker processes,
// with counters rather than scans: at 100,000 jobs, a wait that looked
// through every job at every report would be quadratic.
type massLog struct {
	mu        sync.Mutex
	owner     map[string]int // key → the process that last started it
	started   int            // keys started at least once
	killedAt  time.Time      // zero before the kill
	victim    int
	lost      map[string]bool          // the victim's keys, at the kill
	recovered map[string]time.Duration // victim's key → from the kill to its Start elsewhere
	allUp     chan struct{}            // closed when every job has started
	allBack   chan struct{}            // closed when every victim key started elsewhere
	jobs      int
}

func (l *massLog) start(key string, proc int, at time.Time) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if _, ok := l.owner[key]; !ok {
		l.started++
		if l.started == l.jobs {
			close(l.allUp)
		}
	}
	l.owner[key] = proc
	if l.lost[key] && proc != l.victim {
		if _, ok := l.recovered[key]; !ok {
			l.recovered[key] = at.Sub(l.killedAt)
			if len(l.recovered) == len(l.lost) {
				close(l.allBack)
			}
		}
	}
}

// kill marks proc's keys as lost, at now.
func (l *massLog) kill(proc int) int {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.killedAt, l.victim = time.Now(), proc
	for k, p := range l.owner {
		if p == proc {
			l.lost[k] = true
		}
	}
	if len(l.lost) == 0 {
		close(l.allBack)
	}
	return len(l.lost)
}

// scenarioMass is scenario M: 8 worker processes of 2 workers each;
// 100,000 jobs dispatched by 4 client-only nodes (64 calls each at once),
// timed, with Redis's CPU per job; then one worker process SIGKILLed,
// and the time until each of its jobs started in another process (the
// last one, and the p50 and p99 per job).
func scenarioMass(ctx context.Context, b *bench, _ int) (result, error) {
	r := newResult()
	jobs := b.scaled(100000, 200)
	p := &benchPool{name: fmt.Sprintf("bench-m-%d-%d", time.Now().UnixNano(), poolSeq.Add(1))}
	defer p.close(ctx)
	log := &massLog{owner: make(map[string]int, jobs), lost: map[string]bool{}, recovered: map[string]time.Duration{},
		allUp: make(chan struct{}), allBack: make(chan struct{}), jobs: jobs}
	var procs []*childProc
	defer func() {
		for _, c := range procs {
			c.stop()
		}
	}()
	for i := range massProcs {
		c, err := startSelf(ctx, func(line string) {
			f := strings.Fields(line)
			if len(f) != 3 || f[0] != "S" {
				return
			}
			ns, _ := strconv.ParseInt(f[2], 10, 64)
			log.start(f[1], i, time.Unix(0, ns))
		}, "bench-worker", "-redis", b.addr, "-pool", p.name, "-workers", strconv.Itoa(massWorkers), "-ttl", failoverTTL.String())
		if err != nil {
			return r, err
		}
		procs = append(procs, c)
	}
	var producers []*pool.Node
	for range massProducers {
		c := b.client(2 * massCalls)
		p.clients = append(p.clients, c)
		n, err := pool.AddNode(ctx, c, p.name, pool.WithClientOnly(), pool.WithWorkerTTL(failoverTTL))
		if err != nil {
			return r, err
		}
		p.nodes = append(p.nodes, n)
		producers = append(producers, n)
	}

	cpu := b.startCPU(ctx)
	began := time.Now()
	stats := make([]dispatchStats, massProducers)
	var wg sync.WaitGroup
	for i, n := range producers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			stats[i] = dispatch(ctx, n, i*jobs/massProducers, (i+1)*jobs/massProducers, massCalls)
		}()
	}
	wg.Wait()
	took := time.Since(began)
	cpu.per(ctx, r, "redis_cpu_us_per_job", jobs)
	for _, st := range stats {
		if st.err != nil {
			return r, fmt.Errorf("dispatch: %d errors, first: %w", st.errors, st.err)
		}
	}
	select {
	case <-log.allUp:
	case <-time.After(30 * time.Second):
		return r, fmt.Errorf("only %d of %d jobs reported started", log.started, jobs)
	case <-ctx.Done():
		return r, ctx.Err()
	}
	r.set("jobs", float64(jobs))
	r.setMs("dispatch_ms", took)
	r.set("jobs_per_s", float64(jobs)/took.Seconds())

	if err := procs[0].kill(); err != nil {
		return r, err
	}
	victim := log.kill(0)
	select {
	case <-log.allBack:
	case <-time.After(10*failoverTTL + 60*time.Second):
		return r, fmt.Errorf("%d of the killed process's %d jobs started elsewhere", len(log.recovered), victim)
	case <-ctx.Done():
		return r, ctx.Err()
	}
	log.mu.Lock()
	per := make(latencies, 0, len(log.recovered))
	for _, d := range log.recovered {
		per = append(per, d)
	}
	log.mu.Unlock()
	r.set("victim_jobs", float64(victim))
	r.setMs("recovery_ms", per.pct(100))
	r.setMs("recovery_p50_ms", per.pct(50))
	r.setMs("recovery_p99_ms", per.pct(99))
	r.setMs("worker_ttl_ms", failoverTTL)
	if err := producers[0].Shutdown(ctx); err != nil {
		return r, fmt.Errorf("shutdown: %w", err)
	}
	return r, nil
}
