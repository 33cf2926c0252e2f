package main

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
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
// restarted at once (Sentinel makes it the new master's replica about 10 s
// later); the load goes on until 300 more Submits were acknowledged after
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
//     with WithReplicas, about 10 s, until the new master has a replica;
//   - result_p99_after_switch_ms: p99 of Submit → result of the Submits
//     begun within 2 s after the switch that got a result, and
//     results_after_switch how many those were (0, p99 -1: none; with
//     WithReplicas every Submit fails at once until the new master has a
//     replica again, about 10 s);
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
		// empty, and Sentinel makes it the new master's replica about
		// 10 s later, so that WithReplicas(1) can be met again.
		if err := old.Restart(); err != nil {
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

// tfTask is what TF saw of one task.
type tfTask struct {
	begun    time.Time   // its Submit was called
	acked    bool        // its Submit returned nil
	failed   bool        // its Submit returned an error
	result   time.Time   // its Wait returned a result; zero if not
	lost     bool        // acked, and its Wait returned an error
	attempts []time.Time // when the handler began each attempt
}

// tfBook is TF's bookkeeping: every task by id, from the submitters, the
// waits and the handler.
type tfBook struct {
	mu    sync.Mutex
	tasks map[string]*tfTask
	acked int
}

func newTFBook() *tfBook { return &tfBook{tasks: map[string]*tfTask{}} }

// task returns id's record, new if need be; the caller holds mu.
func (bk *tfBook) task(id string) *tfTask {
	t := bk.tasks[id]
	if t == nil {
		t = &tfTask{}
		bk.tasks[id] = t
	}
	return t
}

// handle is the queue's handler: it notes the attempt and takes 2 ms.
func (bk *tfBook) handle(ctx context.Context, t *queue.Task) ([]byte, error) {
	bk.mu.Lock()
	a := bk.task(t.ID)
	a.attempts = append(a.attempts, time.Now())
	bk.mu.Unlock()
	if err := sleepCtx(ctx, tfHandlerTime); err != nil {
		return nil, err
	}
	return []byte("ok"), nil
}

func (bk *tfBook) begin(id string, at time.Time) {
	bk.mu.Lock()
	defer bk.mu.Unlock()
	bk.task(id).begun = at
}

func (bk *tfBook) submitted(id string, err error) {
	bk.mu.Lock()
	defer bk.mu.Unlock()
	t := bk.task(id)
	if err != nil {
		t.failed = true
		return
	}
	t.acked = true
	bk.acked++
}

func (bk *tfBook) waited(id string, err error, at time.Time) {
	bk.mu.Lock()
	defer bk.mu.Unlock()
	t := bk.task(id)
	if err != nil {
		t.lost = true
		return
	}
	t.result = at
}

func (bk *tfBook) ackedCount() int {
	bk.mu.Lock()
	defer bk.mu.Unlock()
	return bk.acked
}

// record returns TF's metrics (see scenarioQueueFailover) of a load
// whose fault began at faultBegan, lost the primary at fault and ended
// with the switch to a new master at switched.
func (bk *tfBook) record(faultBegan, fault, switched time.Time) result {
	bk.mu.Lock()
	defer bk.mu.Unlock()
	r := newResult()
	var acked, failed, lost, undone, failedRan int
	var before, afterSwitch latencies
	// The first Submits begun after the fault, and after the switch, that
	// got a result.
	var first, firstAfter *tfTask
	for _, t := range bk.tasks {
		switch {
		case t.acked:
			acked++
		case t.failed:
			failed++
			if len(t.attempts) > 0 {
				failedRan++
			}
		}
		if t.lost {
			lost++
		}
		if t.result.IsZero() {
			continue
		}
		for _, a := range t.attempts {
			if a.After(t.result) {
				undone++
				break
			}
		}
		lat := t.result.Sub(t.begun)
		switch {
		case t.begun.Before(faultBegan):
			before = append(before, lat)
		case !t.begun.Before(switched) && t.begun.Before(switched.Add(tfSwitchWindow)):
			afterSwitch = append(afterSwitch, lat)
		}
		if !t.begun.Before(fault) && (first == nil || t.begun.Before(first.begun)) {
			first = t
		}
		if !t.begun.Before(switched) && (firstAfter == nil || t.begun.Before(firstAfter.begun)) {
			firstAfter = t
		}
	}
	r.set("acked", float64(acked))
	r.set("failed_submits", float64(failed))
	r.set("acked_lost", float64(lost))
	r.set("results_undone", float64(undone))
	r.set("failed_submits_ran", float64(failedRan))
	r.setMs("switch_ms", switched.Sub(fault))
	r.set("recovery_ms", -1)
	if first != nil {
		r.setMs("recovery_ms", first.result.Sub(fault))
	}
	r.set("recovery_after_switch_ms", -1)
	if firstAfter != nil {
		r.setMs("recovery_after_switch_ms", firstAfter.result.Sub(switched))
	}
	r.set("results_after_switch", float64(len(afterSwitch)))
	r.set("result_p99_after_switch_ms", -1)
	if len(afterSwitch) > 0 {
		r.setMs("result_p99_after_switch_ms", afterSwitch.pct(99))
	}
	r.setMs("result_p50_before_ms", before.pct(50))
	return r
}

// tfLoad is TF's running load: 4 submitters and a wait per acknowledged
// Submit.
type tfLoad struct {
	stop     chan struct{}
	stopOnce sync.Once
	cancel   context.CancelFunc // ends the waits early (on error)
	wg       sync.WaitGroup
}

// startLoad starts 4 goroutines that submit to q about 1,000 tasks/s in
// all (each at its own pace, not catching up after a slow Submit), every
// task with an id of its own, each acknowledged one waited for (60 s at
// most) in a goroutine of its own.
func (bk *tfBook) startLoad(ctx context.Context, q *queue.Queue) *tfLoad {
	ctx, cancel := context.WithCancel(ctx)
	l := &tfLoad{stop: make(chan struct{}), cancel: cancel}
	every := tfSubmitters * time.Second / tfRate
	prefix := fmt.Sprintf("tf-%d", time.Now().UnixNano())
	for s := range tfSubmitters {
		l.wg.Add(1)
		go func() {
			defer l.wg.Done()
			next := time.Now()
			for i := 0; ; i++ {
				if d := time.Until(next); d > 0 {
					t := time.NewTimer(d)
					select {
					case <-l.stop:
						t.Stop()
						return
					case <-t.C:
					}
				}
				select {
				case <-l.stop:
					return
				default:
				}
				if next = next.Add(every); next.Before(time.Now()) {
					next = time.Now()
				}
				id := fmt.Sprintf("%s-%d-%d", prefix, s, i)
				bk.begin(id, time.Now())
				f, err := q.Submit(ctx, []byte("p"), queue.WithTaskID(id))
				bk.submitted(id, err)
				if err != nil {
					continue
				}
				l.wg.Add(1)
				go func() {
					defer l.wg.Done()
					wctx, wcancel := context.WithTimeout(ctx, tfWaitLimit)
					defer wcancel()
					_, err := f.Wait(wctx)
					bk.waited(id, err, time.Now())
				}()
			}
		}()
	}
	return l
}

// wait stops the submitters and waits until every future ended.
func (l *tfLoad) wait() {
	l.stopOnce.Do(func() { close(l.stop) })
	l.wg.Wait()
	l.cancel()
}

// abort stops the submitters, ends the waits and waits for both.
func (l *tfLoad) abort() {
	l.stopOnce.Do(func() { close(l.stop) })
	l.cancel()
	l.wg.Wait()
}
