package queue

import (
	"context"
	"errors"
	"runtime"
	"time"

	"github.com/shepherd-go/shepherd/internal/backoff"
	"github.com/shepherd-go/shepherd/limit"
)

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

// safetyPoll bounds how long an idle feed trusts that a wake-up would
// have come: pub/sub messages published during a reconnect are lost.
const safetyPoll = time.Second
