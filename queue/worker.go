package queue

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"time"

	"go.opentelemetry.io/otel/trace"

	"github.com/shepherd-go/shepherd/internal/backoff"
	"github.com/shepherd-go/shepherd/limit"
)

// worker runs one task at a time with its own resource.
type worker struct {
	idx  int
	slot slot
}

// maxErrorSize bounds an attempt's error text as stored.
const maxErrorSize = 2048

// work is a worker's goroutine: it opens its resource, then runs the
// tasks it picks from ready until the server stops (a task picked up
// after that is not started: Stop gives it back), reopening its resource
// after a handler broke it.
func (s *Server) work(w *worker) {
	defer w.slot.close()
	for s.openResource(w) {
		s.avail.Add(1)
		select {
		case s.availed <- struct{}{}:
		default:
		}
		fine := true
		for fine {
			select {
			case t := <-s.ready:
				s.picked.Store(time.Now().UnixNano())
				if s.isStopping() {
					fine = false
					break
				}
				fine = s.runTask(w, t)
			case <-s.stopping:
				fine = false
			}
		}
		s.avail.Add(-1)
		if s.isStopping() {
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

// runTask runs one attempt and hands its end to feed. It reports whether
// w's resource is still fine (else w resets it).
func (s *Server) runTask(w *worker, t *Task) bool {
	q := s.q
	if !s.q.leaseSure(t.shard) {
		// Paused, or cut off from Redis: this process may have been
		// declared dead and the task given to another. Start it only once
		// a keep-alive says the lease runs (abandon marks it lost if not).
		if lost, halted := s.awaitLease(t); lost || halted {
			s.outcomes <- outcomeReq{t: t, lost: lost, kind: "release"}
			return true
		}
	}
	if q.maybeWithdrawn(s.hard, t.shard, t.ID) {
		// A failed Submit of this process, not started: given back
		// (no attempt used) for its withdrawal to delete, which also
		// deletes it while taken here (withdrawScript).
		s.outcomes <- outcomeReq{t: t, kind: "release"}
		return true
	}
	ctx, cancel := context.WithTimeout(s.hard, t.timeout)
	r := &run{cancel: cancel, shard: t.shard}
	// Checked and replaced under one lock: abandon (under the same lock)
	// marks either the taken task or this run.
	s.mu.Lock()
	prev := s.running[t.ID]
	lost := prev != nil && prev.lost.Load()
	cancelled := prev != nil && prev.cancelled.Load()
	if !lost && !cancelled {
		s.running[t.ID] = r
	}
	s.mu.Unlock()
	switch {
	case lost:
		// Declared dead between take and now: another process has it.
		cancel()
		s.outcomes <- outcomeReq{t: t, lost: true}
		return true
	case cancelled:
		// Cancelled between take and now (Redis marked it): not run.
		cancel()
		s.outcomes <- outcomeReq{t: t, kind: "fail", data: "cancelled before it started"}
		return true
	}
	ctx, span := q.startProcess(ctx, t)
	inflight := s.busy.Add(1)
	start := time.Now()
	res, err, panicked := call(ctx, w.slot, t)
	returned := time.Now()
	r.finished.Store(true)
	elapsed := returned.Sub(start)
	s.took.add(elapsed)
	timedOut := pastDeadline(ctx, returned)
	if timedOut && err == nil && !panicked {
		res, err = nil, errLateResult // WithTimeout: the attempt has failed
	}
	halted := s.hard.Err() != nil
	cancel()
	s.busy.Add(-1)
	q.m.processing.Record(context.Background(), elapsed.Seconds(), q.m.attrs)
	if !halted {
		q.hist.ran(elapsed)
	}

	reset := panicked || (timedOut && err != nil)
	if reset {
		// The resource may be in any state: reset it before the next task.
		w.slot.close()
	}
	if r.lost.Load() {
		// The process was declared dead: another process has the task.
		recorded(span, "lost")
		s.outcomes <- outcomeReq{t: t, lost: true}
		return !reset
	}
	kind, data, delay := s.classify(t, res, err, panicked, timedOut, halted, elapsed)
	attemptEnded(span, kind, err)
	q.m.attempts.Add(context.Background(), 1, q.m.attrs, outcomeAttr(kind))
	o := outcomeReq{t: t, kind: kind, data: data, delay: delay, stack: stackOf(err), span: span}
	if !halted {
		o.sample = &limit.Sample{RTT: elapsed, InFlight: int(inflight), Dropped: timedOut || kind == "later"}
	}
	s.outcomes <- o
	return !reset
}

// awaitLease waits until the lease in t's shard is sure again, t is
// marked lost (the process was declared dead), or a hard stop.
func (s *Server) awaitLease(t *Task) (lost, halted bool) {
	s.q.kickKeepAlive()
	for !s.q.leaseSure(t.shard) {
		s.mu.Lock()
		r := s.running[t.ID]
		s.mu.Unlock()
		if r != nil && r.lost.Load() {
			return true, false
		}
		if !backoff.Sleep(5*time.Millisecond, s.hard.Done()) {
			return false, true
		}
	}
	return false, false
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
	stack string // a panic's (stackOf), recorded with the error
	delay time.Duration
	lost  bool // the process was declared dead: not recorded
	// sample is what the attempt tells the concurrency limit, nil when it
	// tells nothing (not run, or cut off by a hard stop).
	sample *limit.Sample
	span   trace.Span // the attempt's span, ended once recorded; nil when not traced
}
