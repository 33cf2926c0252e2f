package queue

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"runtime"
	"time"

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
	if !s.q.leaseSure() {
		// Paused, or cut off from Redis: this process may have been
		// declared dead and the task given to another. Start it only once
		// a keep-alive says the lease runs (abandon marks it lost if not).
		if lost, halted := s.awaitLease(t.ID); lost || halted {
			s.outcomes <- outcomeReq{t: t, lost: lost, kind: "release"}
			return true
		}
	}
	ctx, cancel := context.WithTimeout(s.hard, t.timeout)
	r := &run{cancel: cancel}
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

	reset := panicked || (timedOut && err != nil)
	if reset {
		// The resource may be in any state: reset it before the next task.
		w.slot.close()
	}
	if r.lost.Load() {
		// The process was declared dead: another process has the task.
		s.outcomes <- outcomeReq{t: t, lost: true}
		return !reset
	}
	kind, data, delay := s.classify(t, res, err, panicked, timedOut, halted, elapsed)
	q.m.attempts.Add(context.Background(), 1, q.m.attrs, outcomeAttr(kind))
	o := outcomeReq{t: t, kind: kind, data: data, delay: delay, stack: stackOf(err)}
	if !halted {
		o.sample = &limit.Sample{RTT: elapsed, InFlight: int(inflight), Dropped: timedOut || kind == "later"}
	}
	s.outcomes <- o
	return !reset
}

// awaitLease waits until the lease is sure again, the task id is marked
// lost (the process was declared dead), or a hard stop.
func (s *Server) awaitLease(id string) (lost, halted bool) {
	s.q.kickKeepAlive()
	for !s.q.leaseSure() {
		s.mu.Lock()
		r := s.running[id]
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
}

// maxRecordBatch bounds the attempts recorded in one script call.
const maxRecordBatch = 128

// feed is the process's only taker of tasks: it records the attempts'
// ends in batches and takes tasks for the workers in the same script
// call, and takes with no end to record when workers are idle, a task
// may have come (a wake-up), the next delayed task is due, or after
// safetyPoll. It returns when the workers have returned and every end
// is recorded.
func (s *Server) feed() {
	defer close(s.fed)
	// Not s.hard: a take cut off by Halt would leave tasks marked in
	// flight that nobody runs (Stop gives them back, but only then).
	ctx := s.q.tasks.Context()
	timer := time.NewTimer(time.Hour)
	timer.Stop()
	defer timer.Stop()
	bo := backoff.Backoff{Min: 100 * time.Millisecond, Max: 2 * time.Second}
	var (
		fails       int
		outstanding int             // taken, their end not recorded yet
		canTake     = true          // false after a take that got fewer than asked or failed: until a wake-up, the timer or an end
		limited     <-chan struct{} // the limit refused permits: closed at the next release
		demand      = true          // the queue may have tasks for more permits: a wake-up, or the last take filled its permits
		stopping    = s.stopping
		open        = true // s.outcomes
		batch       = make([]outcomeReq, 0, maxRecordBatch)
	)
	want := func() int {
		if stopping == nil {
			return 0
		}
		n := int(s.avail.Load())
		if n > 0 && s.lim == nil {
			n += s.cfg.prefetch
		}
		return max(n-outstanding, 0)
	}
	for open || len(batch) > 0 {
		if len(batch) == 0 && (!canTake || want() == 0) {
			var wake <-chan struct{}
			var tick <-chan time.Time
			if want() > 0 {
				wake, tick = s.q.wake, timer.C
			}
			select {
			case o, ok := <-s.outcomes:
				if !ok {
					open = false
					continue
				}
				batch = append(batch, o)
			case <-wake:
				canTake, demand = true, true
				continue
			case <-tick:
				canTake = true
				continue
			case <-limited:
				limited, canTake = nil, true
				continue
			case <-s.availed:
				continue
			case <-s.modeSet:
				canTake = true // a server switched to drain looks once more, then stops
				continue
			case <-stopping:
				stopping = nil
				continue
			}
		}
		if len(batch) > 0 {
			// Let the workers about to end an attempt (those just given a
			// short task) do so, and join this batch.
			runtime.Gosched()
		}
	more:
		for open && len(batch) < maxRecordBatch {
			select {
			case o, ok := <-s.outcomes:
				if !ok {
					open = false
					break more
				}
				batch = append(batch, o)
			default:
				break more
			}
		}
		var ends []outcomeReq
		for _, o := range batch {
			outstanding--
			if !o.lost {
				ends = append(ends, o)
			}
			if s.lim != nil {
				s.finishPermit(o)
			}
		}
		if s.lim != nil && len(batch) > 0 {
			// Freed before the ends are recorded: the handlers returned,
			// and this call's takes go with the ends in one script call.
			s.lim.free()
		}
		n := want()
		var (
			tasks []*Task
			next  time.Duration
			err   error
			toks  []limit.Token
		)
		if n > 0 && s.lim != nil {
			// The permits come before the take: a task the limit does not
			// allow is never marked in flight.
			ch := s.lim.released()
			toks, limited = s.lim.acquire(s.part, n, demand), nil
			if len(toks) < n {
				limited = ch
			}
			n = len(toks)
		}
		if n > 0 {
			// A wake-up that came before this take is answered by it.
			select {
			case <-s.q.wake:
			default:
			}
		}
		if len(ends) > 0 || n > 0 {
			tasks, next, err = s.record(ctx, ends, n)
		}
		// Only now: until recorded, an attempt must not look like a task
		// marked in flight here that nobody runs (checkOrphans).
		s.mu.Lock()
		for _, o := range batch {
			delete(s.running, o.t.ID)
		}
		s.mu.Unlock()
		batch = batch[:0]
		for i := range toks[:min(len(toks), len(tasks))] {
			tasks[i].tok = toks[i]
		}
		if len(toks) > len(tasks) {
			for _, t := range toks[len(tasks):] {
				t.Ignore()
			}
			s.lim.free()
		}
		if err == nil {
			demand = len(tasks) == n && n > 0 || demand && n == 0
		}
		if len(tasks) < n {
			// Fewer tasks than permits: the limit is not what holds the
			// workers back, a release should not wake this feed (two
			// servers with empty queues would wake each other for ever).
			limited = nil
		}
		outstanding += len(tasks)
		for _, t := range tasks {
			s.ready <- t // never blocks: outstanding <= cap(s.ready)
		}
		if err == nil && n > 0 && len(tasks) < n && outstanding == 0 && stopping != nil && s.Mode() == ModeDrain {
			// Drained: nothing it may run now, nothing in flight.
			stopping = nil
			s.stopOnce.Do(func() { close(s.stopping) }) // SetMode says ErrStopped from now on
			go func() { _ = s.Stop(context.Background()) }()
		}
		if err == nil {
			fails = 0
			bo.Reset()
		}
		if limited != nil && err == nil && len(tasks) == n {
			// The limit is the bottleneck: take again at the next release
			// (or a wake-up; the timer in case a partition's reserved
			// share, not a task, stands in the way).
			canTake = false
			timer.Reset(limitPoll)
			continue
		}
		if len(tasks) == n {
			if n > 0 {
				canTake = true // there may be more
			}
			continue
		}
		canTake = false
		wait := safetyPoll
		switch {
		case err != nil:
			fails++
			wait = bo.Next()
			switch {
			case errors.Is(err, errGone) || errors.Is(err, errLate):
				// The keep-alive says what happened, once.
				s.q.logger.Debug("not taking tasks until the process is registered again", "error", err)
			case ctx.Err() == nil && fails <= 3 || fails%20 == 0:
				s.q.logger.Warn("taking tasks failed", "error", err, "failures", fails)
			}
		case next >= 0 && next < wait:
			wait = next
		}
		timer.Reset(wait)
	}
}

// limitPoll is how often a server whose limit refused permits looks
// again without a release (a partition's reserved share expires without
// one).
const limitPoll = 50 * time.Millisecond

// finishPermit releases the permit of an attempt that ended.
func (s *Server) finishPermit(o outcomeReq) {
	if o.sample != nil && o.sample.Dropped {
		s.drops.Add(1)
		s.q.m.limitDrops.Add(context.Background(), 1, s.q.m.limitAttrs(s))
	}
	s.part.finish(o.t.tok, o.sample)
	o.t.tok = limit.Token{}
}
