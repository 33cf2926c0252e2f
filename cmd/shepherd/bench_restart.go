package main

import (
	"context"
	"fmt"
	"slices"
	"sort"
	"strconv"
	"time"

	"github.com/shepherd-go/shepherd/pool"
)

// Scenario R's shape: 4 nodes of 4 workers, 2,000 jobs, every node
// restarted in turn.
const (
	restartNodes   = 4
	restartPerNode = 4
	restartGrace   = 30 * time.Second
)

// scenarioRestarts is scenario R: rolling restarts. Each of 4 nodes (4
// workers each) running 2,000 jobs in all is closed and added again with
// the same options and 4 workers, in turn, once every job runs again
// where it ran before. It runs once without a stable identity (Close
// hands the node's jobs over, and the returning node takes them back:
// each starts twice) and once with WithNodeID (they wait for it: each
// starts once), and reports, per variant, the Starts during the restarts
// per job, the longest a job had no worker running it, and Redis's CPU
// per job.
func scenarioRestarts(ctx context.Context, b *bench, _ int) (result, error) {
	without, err := b.restarts(ctx, false)
	if err != nil {
		return without, fmt.Errorf("without identity: %w", err)
	}
	with, err := b.restarts(ctx, true)
	if err != nil {
		return with, fmt.Errorf("with identity: %w", err)
	}
	without.more = []result{with}
	return without, nil
}

// restarts runs scenario R's restarts once, with stable identities or
// without.
func (b *bench) restarts(ctx context.Context, stable bool) (result, error) {
	r := newResult()
	r.Variant = "stable_identity=" + strconv.FormatBool(stable)
	r.flag("stable_identity", stable)
	jobs := b.scaled(2000, 100)
	p, nodeOpts, err := b.restartPool(ctx, stable)
	if err != nil {
		return r, err
	}
	defer p.close(ctx)
	if st := dispatch(ctx, p.client, 0, jobs, 64); st.err != nil {
		return r, fmt.Errorf("dispatch: %d errors, first: %w", st.errors, st.err)
	}
	// Where each job runs: worker i is node i/restartPerNode's.
	var home map[string]int
	if err := p.log.waitFor(ctx, 60*time.Second, func() bool {
		home = make(map[string]int, len(p.log.owner))
		for k, w := range p.log.owner {
			home[k] = w / restartPerNode
		}
		return len(home) == jobs
	}); err != nil {
		return r, fmt.Errorf("waiting for the jobs to start: %w", err)
	}
	p.log.mu.Lock()
	mark := len(p.log.events)
	p.log.mu.Unlock()

	cpu := b.startCPU(ctx)
	begin := time.Now()
	for i := range restartNodes {
		if err := p.nodes[i].Close(ctx); err != nil {
			return r, fmt.Errorf("close node %d: %w", i, err)
		}
		n, err := pool.AddNode(ctx, p.clients[i], p.name, nodeOpts[i]...)
		if err != nil {
			return r, fmt.Errorf("add node %d again: %w", i, err)
		}
		p.nodes[i] = n
		for j := range restartPerNode {
			w := i*restartPerNode + j
			if _, err := n.AddWorker(ctx, &benchHandler{worker: w, log: p.log}); err != nil {
				return r, fmt.Errorf("add worker %d again: %w", w, err)
			}
		}
		// Every job runs again, each on its own node.
		if err := p.log.waitFor(ctx, 60*time.Second, func() bool {
			if len(p.log.owner) != jobs {
				return false
			}
			for k, w := range p.log.owner {
				if w/restartPerNode != home[k] {
					return false
				}
			}
			return true
		}); err != nil {
			return r, fmt.Errorf("waiting for the jobs after restarting node %d: %w", i, err)
		}
	}
	took := time.Since(begin)
	cpu.per(ctx, r, "redis_cpu_us_per_job", jobs)

	p.log.mu.Lock()
	events := slices.Clone(p.log.events[mark:])
	p.log.mu.Unlock()
	starts := 0
	for _, e := range events {
		if !e.stop {
			starts++
		}
	}
	r.set("jobs", float64(jobs))
	r.set("starts_per_job", float64(starts)/float64(jobs))
	r.setMs("max_job_gap_ms", maxGap(events))
	r.setMs("restarts_ms", took)
	return r, nil
}

// restartPool builds scenario R's pool: restartNodes full nodes of
// restartPerNode workers, each node with a stable identity or none, and a
// client-only node. It returns each full node's options, for its restart.
func (b *bench) restartPool(ctx context.Context, stable bool) (*benchPool, [][]pool.NodeOption, error) {
	p := &benchPool{
		name: "bench-r-" + strconv.FormatInt(time.Now().UnixNano(), 36) + "-" + strconv.FormatInt(poolSeq.Add(1), 10),
		log:  newStartLog(),
	}
	opts := make([][]pool.NodeOption, restartNodes)
	for i := range restartNodes {
		if stable {
			opts[i] = []pool.NodeOption{pool.WithNodeID("node-" + strconv.Itoa(i)), pool.WithRestartGrace(restartGrace)}
		}
		c := b.client(16 + 4*restartPerNode)
		p.clients = append(p.clients, c)
		n, err := pool.AddNode(ctx, c, p.name, opts[i]...)
		if err != nil {
			p.close(ctx)
			return nil, nil, err
		}
		p.nodes = append(p.nodes, n)
		for j := range restartPerNode {
			if _, err := n.AddWorker(ctx, &benchHandler{worker: i*restartPerNode + j, log: p.log}); err != nil {
				p.close(ctx)
				return nil, nil, err
			}
		}
	}
	c := b.client(256)
	p.clients = append(p.clients, c)
	n, err := pool.AddNode(ctx, c, p.name, pool.WithClientOnly())
	if err != nil {
		p.close(ctx)
		return nil, nil, err
	}
	p.client = n
	return p, opts, nil
}

// maxGap returns the longest time any key of events had no worker
// running it: from a Stop that left it running nowhere to its next
// Start.
func maxGap(events []startEvent) time.Duration {
	byKey := map[string][]startEvent{}
	for _, e := range events {
		byKey[e.key] = append(byKey[e.key], e)
	}
	var longest time.Duration
	for _, evs := range byKey {
		sort.SliceStable(evs, func(i, j int) bool { return evs[i].at.Before(evs[j].at) })
		running := map[int]bool{}
		var idle time.Time
		for _, e := range evs {
			if e.stop {
				delete(running, e.worker)
				if len(running) == 0 {
					idle = e.at
				}
				continue
			}
			if len(running) == 0 && !idle.IsZero() {
				longest = max(longest, e.at.Sub(idle))
			}
			running[e.worker] = true
		}
	}
	return longest
}
