package main

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/shepherd-go/shepherd/internal/redistest"
	"github.com/shepherd-go/shepherd/queue"
)

// TF's shape: queue/failover_test.go's runQueueFailover, measured.
const (
	tfTTL          = 2 * time.Second        // the queue's WithTTL
	tfReplicaWait  = 500 * time.Millisecond // WithReplicas(1, ...)'s timeout
	tfProcs        = 2                      // queue processes, each on a failover client of its own
	tfWorkers      = 4                      // workers per process
	tfHandlerTime  = 2 * time.Millisecond   // what the handler takes
	tfSubmitters   = 4                      // submitting goroutines
	tfRate         = 1000                   // tasks/s submitted, in total
	tfBeforeFault  = 2 * time.Second        // load before the fault
	tfBehindLoad   = 700 * time.Millisecond // "behind": load the frozen replica misses
	tfJunkMiB      = 16                     // "behind": MiB written to fill the replica's socket buffers
	tfAckedAfter   = 300                    // acknowledged Submits after the switch that end the load
	tfAfterLimit   = 40 * time.Second       // ... or this long after the switch
	tfWaitLimit    = 60 * time.Second       // each future's Wait
	tfSwitchWindow = 2 * time.Second        // Submits begun this long after the switch make the p99
	tfVariantLimit = 4 * time.Minute        // one (kind, replicas), start to end
)

// tfKinds are the failovers TF measures, in order: "kill" SIGKILLs the
// primary; "planned" is a SENTINEL FAILOVER; "behind" freezes the replica
// and fills its socket buffers, so that it misses 700 ms of writes, then
// kills the primary and thaws the replica.
var tfKinds = []string{"kill", "planned", "behind"}

// scenarioQueueFailover is TF: what a failover of a Sentinel group does
// to a queue under load (queue/failover_test.go's runQueueFailover as a
// benchmark). For each kind of failover (tfKinds), and WithReplicas off
// (replicas 0) and WithReplicas(1, 500ms) (replicas 1), on a fresh group (a primary, 1 replica, three sentinels,
// down-after 1s, started for it and removed after it): 2 processes of a
// queue (WithTTL(2s), 4 workers each, a 2 ms handler), 4 goroutines
// submitting about 1,000 tasks/s with known ids and waiting for each
// future (60 s at most); the fault after 2 s; the killed primary is
// restarted at once as the new master's replica (redistest's Rejoin: as
// Sentinel's rewritten configuration would, not as an empty master that a
// second failover may promote); the load goes on until 300 more Submits were acknowledged after
// the switch, or for 40 s, and then every future is waited for. One line
// per (kind, replicas), told apart by the label kind and the metric
// replicas:
//
//   - acked: Submits that returned nil; failed_submits: those that did not;
//   - acked_lost: acknowledged tasks whose Wait returned an error (such
//     as queue.ErrOutcomeLost);
//   - results_undone: tasks whose handler began an attempt after the
//     caller's Wait had returned its result;
//   - failed_submits_ran: Submits that returned an error whose task ran;
//   - switch_ms: from the fault until the sentinels name a new master
//     that answers as one (WaitMaster; Failover's return);
//   - recovery_ms: from the fault until the result of the first Submit
//     begun after it that got one (-1: none did); a planned failover
//     leaves the old primary serving until the switch, so this is short;
//   - recovery_after_switch_ms: the same from the switch (-1: none did):
//     with WithReplicas, until the new master has a replica again (after
//     a planned failover, when Sentinel demotes the old one, about 10 s);
//   - result_p99_after_switch_ms: p99 of Submit → result of the Submits
//     begun within 2 s after the switch that got a result, and
//     results_after_switch how many those were (0, p99 -1: none; with
//     WithReplicas every Submit fails at once until the new master has a
//     replica again);
//   - result_p50_before_ms: p50 of Submit → result of the Submits begun
//     before the fault (for "behind", before the replica was frozen).
//
// "The fault" is the moment the primary is lost: the SIGKILL ("kill",
// "behind") or the SENTINEL FAILOVER asked ("planned"). With replicas 1,
// acked_lost and results_undone must be 0: that is WithReplicas's
// guarantee. A run takes about a minute and a half; -scale does not
// apply.
func scenarioQueueFailover(ctx context.Context, b *bench, _ int) (result, error) {
	var out []result
	for _, kind := range tfKinds {
		for _, replicas := range []int{0, 1} {
			r, err := tfVariant(ctx, kind, replicas)
			if err != nil {
				return newResult(), fmt.Errorf("%s replicas=%d: %w", kind, replicas, err)
			}
			out = append(out, r)
		}
	}
	first := out[0]
	first.more = out[1:]
	return first, nil
}

// tfVariant measures one (kind, replicas) on a Sentinel group of its own,
// and leaves no process of it behind, also on error.
func tfVariant(ctx context.Context, kind string, replicas int) (r result, err error) {
	ctx, cancel := context.WithTimeout(ctx, tfVariantLimit)
	defer cancel()
	g, err := redistest.NewSentinels(redistest.WithSentinelReplicas(1), redistest.WithDownAfter(time.Second))
	if err != nil {
		return newResult(), fmt.Errorf("sentinel group: %w", err)
	}
	defer func() { err = errors.Join(err, g.Close()) }()

	book := newTFBook()
	var qs []*queue.Queue
	closeQueues := func() error {
		cctx, ccancel := context.WithTimeout(context.WithoutCancel(ctx), 30*time.Second)
		defer ccancel()
		var errs []error
		for _, q := range qs {
			errs = append(errs, q.Close(cctx))
		}
		qs = nil
		return errors.Join(errs...)
	}
	defer func() {
		if cerr := closeQueues(); cerr != nil && err == nil {
			err = fmt.Errorf("close queues: %w", cerr)
		}
	}() // before the group's Close
	opts := []queue.Option{queue.WithTTL(tfTTL)}
	if replicas > 0 {
		opts = append(opts, queue.WithReplicas(replicas, tfReplicaWait))
	}
	name := benchQueueName("tf")
	for range tfProcs {
		q, err := queue.Open(ctx, g.NewFailoverClient(), name, opts...)
		if err != nil {
			return newResult(), err
		}
		qs = append(qs, q)
		if _, err := q.Serve(book.handle, queue.WithWorkers(tfWorkers)); err != nil {
			return newResult(), err
		}
	}

	load := book.startLoad(ctx, qs[0])
	defer load.abort() // on error: the waits end at once; after wait a no-op
	if err := sleepCtx(ctx, tfBeforeFault); err != nil {
		return newResult(), err
	}
	old, err := g.Primary(ctx)
	if err != nil {
		return newResult(), err
	}
	faultBegan := time.Now()
	fault, err := tfFault(ctx, g, old, kind)
	if err != nil {
		return newResult(), err
	}
	switched := time.Now()
	if kind != "planned" {
		// The only replica is the new master: the killed one comes back
		// empty, as its replica, so that WithReplicas(1) can be met
		// again. Restarted as it was, an empty master until Sentinel
		// turned it, a second failover (the new master missing its 1 s
		// down-after on a loaded machine) promoted it and wiped every
		// acknowledged task (redistest's Rejoin).
		if err := g.Rejoin(ctx, old); err != nil {
			return newResult(), fmt.Errorf("restart the old primary: %w", err)
		}
	}
	acked0 := book.ackedCount()
	deadline := switched.Add(tfAfterLimit)
	for book.ackedCount() < acked0+tfAckedAfter && time.Now().Before(deadline) {
		if err := sleepCtx(ctx, 10*time.Millisecond); err != nil { // polling our own counter
			return newResult(), err
		}
	}
	load.wait()
	if err := closeQueues(); err != nil { // no attempt starts after it
		return newResult(), fmt.Errorf("close queues: %w", err)
	}
	r = book.record(faultBegan, fault, switched)
	r.Variant = fmt.Sprintf("kind=%s replicas=%d", kind, replicas)
	r.label("kind", kind)
	r.set("replicas", float64(replicas))
	return r, nil
}

// tfFault fails the primary old over as kind says and returns when it was
// lost (the SIGKILL, or the SENTINEL FAILOVER asked), once a new master
// answers as one.
func tfFault(ctx context.Context, g *redistest.Sentinels, old *redistest.Server, kind string) (time.Time, error) {
	var fault time.Time
	var err error
	switch kind {
	case "kill":
		fault = time.Now()
		if err := old.Kill(); err != nil {
			return fault, err
		}
		_, err = g.WaitMaster(ctx, old)
	case "planned":
		fault = time.Now()
		_, err = g.Failover(ctx)
	case "behind":
		rs, rerr := g.Replicas(ctx)
		if rerr != nil {
			return fault, rerr
		}
		if len(rs) != 1 {
			return fault, fmt.Errorf("%d replicas, not 1", len(rs))
		}
		if err := rs[0].Freeze(); err != nil {
			return fault, err
		}
		// A frozen replica's kernel still takes in what the master sends,
		// up to its socket buffers: 16 MiB of other writes fill them, so
		// that the queue's writes from then on stay on the master alone.
		junk := strings.Repeat("x", 1<<20)
		for i := range tfJunkMiB {
			if err := old.Client().Set(ctx, fmt.Sprintf("shepherd-bench-tf-junk-%d", i), junk, 0).Err(); err != nil {
				return fault, fmt.Errorf("junk: %w", err)
			}
		}
		if err := sleepCtx(ctx, tfBehindLoad); err != nil { // writes go on that the replica never gets
			return fault, err
		}
		fault = time.Now()
		if err := old.Kill(); err != nil {
			return fault, err
		}
		if err := rs[0].Thaw(); err != nil {
			return fault, err
		}
		_, err = g.WaitMaster(ctx, old)
	default:
		return fault, fmt.Errorf("unknown kind of failover %q", kind)
	}
	return fault, err
}
