package queue

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"runtime/debug"
	"time"

	"github.com/shepherd-go/shepherd/internal/backoff"
	"github.com/shepherd-go/shepherd/internal/script"
)

// worker runs one task at a time with its own resource.
type worker struct {
	idx   int
	tasks chan *Task // capacity 1: filled only while the worker is idle
	slot  slot
}

// maxErrorSize bounds an attempt's error text as stored.
const maxErrorSize = 2048

// work is a worker's goroutine: it opens its resource, then runs the
// tasks the dispatcher hands it until the dispatcher has returned.
func (s *Server) work(w *worker) {
	defer w.slot.close()
	if !s.openResource(w) {
		return
	}
	s.free <- w
	for {
		select {
		case t := <-w.tasks:
			if s.runTask(w, t) {
				continue // recordLoop gives it its next task, or back to the dispatcher
			}
			if !s.openResource(w) {
				return
			}
			s.free <- w
		case <-s.dispDone:
			// No more hand-outs: run what was handed out last.
			select {
			case t := <-w.tasks:
				s.runTask(w, t)
			default:
			}
			return
		}
	}
}

// openResource opens w's resource, retrying with a backoff; it reports
// false when the server stops first.
func (s *Server) openResource(w *worker) bool {
	bo := backoff.Backoff{Min: 100 * time.Millisecond, Max: 5 * time.Second}
	for fails := 1; ; fails++ {
		err := w.slot.open(s.hard)
		if err == nil {
			return true
		}
		s.q.logger.Warn("opening a worker's resource failed", "worker", w.idx, "error", err, "failures", fails)
		if !backoff.Sleep(bo.Next(), s.stopping) {
			return false
		}
	}
}

// runTask runs one attempt and hands its end to recordLoop. It reports
// whether it handed w over too (its resource is fine): recordLoop then
// gives w its next task, or gives it back to the dispatcher.
func (s *Server) runTask(w *worker, t *Task) bool {
	q := s.q
	ctx, cancel := context.WithTimeout(s.hard, t.timeout)
	r := &run{cancel: cancel}
	s.mu.Lock()
	if prev := s.running[t.ID]; prev != nil && (prev.lost.Load() || prev.cancelled.Load()) {
		// Declared dead, or cancelled, between hand-out and now.
		r.lost.Store(prev.lost.Load())
		cancel()
	}
	s.running[t.ID] = r
	s.mu.Unlock()
	s.busy.Add(1)
	start := time.Now()
	res, err, panicked := call(ctx, w.slot, t)
	r.finished.Store(true)
	elapsed := time.Since(start)
	timedOut := errors.Is(ctx.Err(), context.DeadlineExceeded)
	halted := s.hard.Err() != nil
	cancel()
	s.busy.Add(-1)
	q.m.processing.Record(context.Background(), elapsed.Seconds(), q.m.attrs)

	reset := panicked || (timedOut && err != nil)
	if reset {
		// The resource may be in any state: reset it before the next task.
		w.slot.close()
	}
	if r.lost.Load() {
		// The process was declared dead: another process has the task.
		s.mu.Lock()
		delete(s.running, t.ID)
		s.mu.Unlock()
		return false
	}
	kind, data, delay := s.classify(t, res, err, panicked, timedOut, halted, elapsed)
	q.m.attempts.Add(context.Background(), 1, q.m.attrs, outcomeAttr(kind))
	o := outcomeReq{t: t, kind: kind, data: data, delay: delay}
	if !reset {
		o.w = w
	}
	s.outcomes <- o
	return o.w != nil
}

// call runs the handler, turning a panic into an error.
func call(ctx context.Context, sl slot, t *Task) (res []byte, err error, panicked bool) {
	defer func() {
		if p := recover(); p != nil {
			res, err, panicked = nil, fmt.Errorf("panic: %v\n%s", p, debug.Stack()), true
		}
	}()
	res, err = sl.handle(ctx, t)
	return res, err, false
}

// classify decides what an attempt's end means for the task: the kind
// and data of completeScript, and the delay before the next attempt.
func (s *Server) classify(t *Task, res []byte, err error, panicked, timedOut, halted bool, elapsed time.Duration) (kind, data string, delay time.Duration) {
	q := s.q
	if err == nil {
		if len(res) > q.cfg.maxPayloadSize {
			return "perm", fmt.Sprintf("%v: the result has %d bytes, MaxPayloadSize is %d", ErrPayloadTooLarge, len(res), q.cfg.maxPayloadSize), 0
		}
		return "ok", string(res), 0
	}
	if halted {
		return "release", "", 0
	}
	msg := err.Error()
	if timedOut && !panicked {
		msg = fmt.Sprintf("timed out after %v: %s", elapsed.Round(time.Millisecond), msg)
	}
	if len(msg) > maxErrorSize {
		msg = msg[:maxErrorSize] + "…"
	}
	var later *laterError
	var perm *permanentError
	switch {
	case errors.As(err, &later):
		return "later", msg, max(later.d, time.Millisecond)
	case errors.As(err, &perm):
		return "perm", msg, 0
	}
	return "fail", msg, s.backoff(t.Attempt)
}

// backoff is the delay before attempt+1: base·2^(attempt-1) capped, with
// a random half of it taken off (jitter, so that tasks that failed
// together do not come back together).
func (s *Server) backoff(attempt int) time.Duration {
	d := s.cfg.backoffCap
	if attempt < 40 {
		d = min(s.cfg.backoffBase<<(attempt-1), s.cfg.backoffCap)
		if d <= 0 {
			d = s.cfg.backoffCap
		}
	}
	return d/2 + rand.N(d/2+1)
}

// outcomeReq is an attempt's end, waiting to be recorded.
type outcomeReq struct {
	t     *Task
	kind  string
	data  string
	delay time.Duration
	w     *worker // waits for its next task; nil: it comes back by itself
}

// maxRecordBatch bounds the attempts recorded in one script call.
const maxRecordBatch = 128

// recordLoop records the attempts' ends in batches, one script call
// each, until the workers have returned and every end is recorded.
func (s *Server) recordLoop() {
	defer close(s.recorded)
	batch := make([]outcomeReq, 0, maxRecordBatch)
	for first := range s.outcomes {
		batch = append(batch[:0], first)
	more:
		for len(batch) < maxRecordBatch {
			select {
			case o, ok := <-s.outcomes:
				if !ok {
					break more
				}
				batch = append(batch, o)
			default:
				break more
			}
		}
		var idle []*worker
		for _, o := range batch {
			if o.w != nil {
				idle = append(idle, o.w)
			}
		}
		n := len(idle)
		if s.isStopping() {
			n = 0
		}
		tasks := s.record(batch, n)
		s.mu.Lock()
		for _, o := range batch {
			delete(s.running, o.t.ID)
		}
		s.mu.Unlock()
		for i, w := range idle {
			if i < len(tasks) {
				w.tasks <- tasks[i]
			} else {
				s.free <- w
			}
		}
	}
}

// record runs completeScript for a batch, taking up to n tasks, and
// returns those; it retries while Redis does not answer (a retry whose
// first try did run takes tasks again: the first ones are given back by
// checkOrphans). It gives up when the Queue closes (its deregistration
// then gives the tasks back).
func (s *Server) record(batch []outcomeReq, n int) []*Task {
	q := s.q
	args := q.lay.commonArgs(q.proc, n, promoteLimit)
	for _, o := range batch {
		args = append(args, o.t.ID, o.t.Attempt, o.kind, o.data, o.delay.Milliseconds())
	}
	bo := backoff.Backoff{Min: 50 * time.Millisecond, Max: time.Second}
	for fails := 0; ; fails++ {
		ctx, cancel := context.WithTimeout(q.tasks.Context(), loopCallTimeout)
		res, err := script.Run(ctx, q.rdb, completeScript, "queue: record outcomes", q.lay.common(q.lay.inflight(q.proc)), args...)
		cancel()
		if err == nil {
			out, _ := res.([]any)
			if len(out) < 2+len(batch) {
				q.logger.Error("recording outcomes: unexpected reply", "reply", res)
				return nil
			}
			for i, st := range out[2 : 2+len(batch)] {
				if st == "STALE" {
					o := batch[i]
					q.logger.Info("an attempt's outcome came too late: the task was given to another process or cancelled", "task", o.t.ID, "attempt", o.t.Attempt)
				}
			}
			if d, _ := out[0].(int64); d > 0 {
				q.droppedDead(context.Background(), d)
			}
			if n == 0 {
				return nil
			}
			tasks, _, err := s.taken(context.Background(), out[2+len(batch):])
			if err != nil && !errors.Is(err, errGone) {
				q.logger.Debug("taking tasks with the outcomes failed", "error", err)
			}
			return tasks
		}
		if q.tasks.Context().Err() != nil {
			return nil
		}
		if fails == 0 || fails%20 == 0 {
			q.logger.Warn("recording outcomes failed; retrying", "tasks", len(batch), "error", err, "failures", fails+1)
		}
		if !backoff.Sleep(bo.Next(), q.tasks.Context().Done()) {
			return nil
		}
	}
}
