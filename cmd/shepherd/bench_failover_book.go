package main

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/shepherd-go/shepherd/queue"
)

// TF's book: what each task of the load went through (submitted,
// acknowledged, run, waited), and the result it makes.

// tfTask is what TF saw of one task.
type tfTask struct {
	begun    time.Time   // its Submit was called
	acked    bool        // its Submit returned nil
	failed   bool        // its Submit returned an error
	result   time.Time   // its Wait returned a result; zero if not
	lost     bool        // acked, and its Wait returned an error
	lostErr  string      // that error
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
		// Grouped by kind: the text before the task's id.
		t.lost = true
		t.lostErr, _, _ = strings.Cut(err.Error(), ": \"")
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
	lostErrs := map[string]int{}
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
			lostErrs[t.lostErr]++
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
	if lost > 0 {
		// What the lost tasks' Waits returned, for the one who must
		// find out why.
		var errs []string
		for e, n := range lostErrs {
			errs = append(errs, fmt.Sprintf("%d× %s", n, e))
		}
		slices.Sort(errs)
		r.label("acked_lost_errors", strings.Join(errs, "; "))
	}
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
