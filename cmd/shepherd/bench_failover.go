package main

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/shepherd-go/shepherd/pool"
)

// failoverTTL is scenario C's WorkerTTL.
const failoverTTL = 2 * time.Second

// scenarioFailover is scenario C: two worker processes of 4 workers,
// 1,000 jobs; SIGKILL one process and time until every job it owned has
// started in the other, counting the survivor's jobs restarted needlessly.
func scenarioFailover(ctx context.Context, b *bench, _ int) (result, error) {
	r := newResult()
	jobs := b.scaled(1000, 10)
	p := &benchPool{name: fmt.Sprintf("bench-c-%d-%d", time.Now().UnixNano(), poolSeq.Add(1)), log: newStartLog()}
	defer p.close(ctx)
	var procs []*childProc
	defer func() {
		for _, c := range procs {
			c.stop()
		}
	}()
	for i := range 2 {
		c, err := startChild(ctx, b.addr, p.name, i, p.log)
		if err != nil {
			return r, err
		}
		procs = append(procs, c)
	}
	c := b.client(256)
	p.clients = append(p.clients, c)
	n, err := pool.AddNode(ctx, c, p.name, pool.WithClientOnly(), pool.WithWorkerTTL(failoverTTL))
	if err != nil {
		return r, err
	}
	p.client = n
	st := dispatch(ctx, p.client, 0, jobs, 64)
	if st.err != nil {
		return r, fmt.Errorf("dispatch: %d errors, first: %w", st.errors, st.err)
	}
	if err := p.log.waitFor(ctx, 10*time.Second, func() bool { return len(p.log.owner) == jobs }); err != nil {
		return r, fmt.Errorf("waiting for the start reports: %w", err)
	}
	p.log.mu.Lock()
	before := make(map[string]int, len(p.log.owner))
	for k, w := range p.log.owner {
		before[k] = w
	}
	mark := len(p.log.events)
	p.log.mu.Unlock()

	killed := time.Now()
	if err := procs[0].kill(); err != nil {
		return r, err
	}
	err = p.log.waitFor(ctx, 10*failoverTTL+10*time.Second, func() bool {
		for k, w := range before {
			if w == 0 && p.log.owner[k] != 1 {
				return false
			}
		}
		return true
	})
	if err != nil {
		return r, fmt.Errorf("waiting for the victim's jobs: %w", err)
	}
	p.log.mu.Lock()
	var last time.Time
	restarted := map[string]bool{}
	victim := 0
	for _, e := range p.log.events[mark:] {
		if e.worker != 1 {
			continue
		}
		switch {
		case before[e.key] == 0 && !e.stop:
			last = e.at
		case before[e.key] == 1:
			restarted[e.key] = true // a Stop or Start of a job the survivor already ran
		}
	}
	for _, w := range before {
		if w == 0 {
			victim++
		}
	}
	p.log.mu.Unlock()
	r.set("jobs", float64(jobs))
	r.set("victim_jobs", float64(victim))
	r.setMs("recovery_ms", last.Sub(killed))
	r.set("survivor_restarts", float64(len(restarted)))
	begin := time.Now()
	if err := p.client.Shutdown(ctx); err != nil {
		return r, fmt.Errorf("shutdown: %w", err)
	}
	r.setMs("shutdown_ms", time.Since(begin))
	return r, nil
}

// startChild starts a bench-worker process that reports its starts and
// stops into log as worker idx, and waits until it is ready.
func startChild(ctx context.Context, addr, poolName string, idx int, log *startLog) (*childProc, error) {
	return startSelf(ctx, func(line string) {
		f := strings.Fields(line)
		if len(f) != 3 {
			return
		}
		ns, _ := strconv.ParseInt(f[2], 10, 64)
		log.record(startEvent{key: f[1], worker: idx, at: time.Unix(0, ns), stop: f[0] == "X"})
	}, "bench-worker", "-redis", addr, "-pool", poolName, "-workers", "4", "-ttl", failoverTTL.String())
}
