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
//
// Each round waits for something to do, gathers the ends waiting,
// releases their permits, takes permits for the take, records and takes
// in one call, hands the tasks out and decides when to take again.
func (s *Server) feed() {
	defer close(s.fed)
	f := s.newFeeder()
	defer f.timer.Stop()
	for f.open || len(f.batch) > 0 {
		if len(f.batch) == 0 && (!f.canTake || f.want() == 0) && !f.wait() {
			continue // no end to record: look again
		}
		f.gather()
		ends := f.ends()
		r := f.permits(f.want())
		f.exchange(&r, ends)
		f.retire()
		f.attach(r)
		f.learn(r)
		f.handOut(r.tasks)
		f.stopIfDrained(r)
		f.schedule(r)
	}
}

// feeder is feed's state between rounds.
type feeder struct {
	s *Server
	// ctx is not s.hard: a take cut off by Halt would leave tasks marked
	// in flight that nobody runs (Stop gives them back, but only then).
	ctx   context.Context
	timer *time.Timer // when to take again without a wake-up (schedule)
	bo    backoff.Backoff
	fails int // takes failed in a row

	outstanding int             // taken, their end not recorded yet
	canTake     bool            // false after a take that got fewer than asked or failed: until a wake-up, the timer or an end
	limited     <-chan struct{} // the limit refused permits: closed at the next release
	demand      bool            // the queue may have tasks for more permits: a wake-up, or the last take filled its permits
	stopping    <-chan struct{} // s.stopping, nil once it closed (or the server drained)
	open        bool            // s.outcomes is open
	batch       []outcomeReq    // ends to record
}

// round is what one round of feed asked for and got.
type round struct {
	n     int           // tasks asked for: the workers' want, or the permits the limit gave
	toks  []limit.Token // the permits, with a limit
	tasks []*Task       // taken
	next  time.Duration // when the next delayed task is due (-1: none)
	err   error         // the call failed
}

func (s *Server) newFeeder() *feeder {
	f := &feeder{
		s:        s,
		ctx:      s.q.tasks.Context(),
		timer:    time.NewTimer(time.Hour),
		bo:       backoff.Backoff{Min: 100 * time.Millisecond, Max: 2 * time.Second},
		canTake:  true,
		demand:   true,
		stopping: s.stopping,
		open:     true,
		batch:    make([]outcomeReq, 0, maxRecordBatch),
	}
	f.timer.Stop()
	return f
}

// want is how many tasks to take: for the workers with an open resource
// (plus the prefetch, without a limit) less those taken and not ended;
// none once the server stops.
func (f *feeder) want() int {
	if f.stopping == nil {
		return 0
	}
	n := int(f.s.avail.Load())
	if n > 0 && f.s.lim == nil {
		n += f.s.cfg.prefetch
	}
	return max(n-f.outstanding, 0)
}

// wait blocks until something happens: an attempt's end (it returns true,
// the end in the batch), or a reason to look again (false): the outcomes
// closed, a wake-up, the timer, a permit released, a worker's resource
// opened, the mode changed, or Stop. Wake-ups and the timer count only
// while it wants tasks.
func (f *feeder) wait() bool {
	s := f.s
	var wake <-chan struct{}
	var tick <-chan time.Time
	if f.want() > 0 {
		wake, tick = s.q.wake, f.timer.C
	}
	select {
	case o, ok := <-s.outcomes:
		if !ok {
			f.open = false
			return false
		}
		f.batch = append(f.batch, o)
		return true
	case <-wake:
		f.canTake, f.demand = true, true
	case <-tick:
		f.canTake = true
	case <-f.limited:
		f.limited, f.canTake = nil, true
	case <-s.availed:
	case <-s.modeSet:
		f.canTake = true // a server switched to drain looks once more, then stops
	case <-f.stopping:
		f.stopping = nil
	}
	return false
}

// gather adds the ends waiting to the batch, up to maxRecordBatch.
func (f *feeder) gather() {
	if len(f.batch) > 0 {
		// Let the workers about to end an attempt (those just given a
		// short task) do so, and join this batch.
		runtime.Gosched()
	}
	for f.open && len(f.batch) < maxRecordBatch {
		select {
		case o, ok := <-f.s.outcomes:
			if !ok {
				f.open = false
				return
			}
			f.batch = append(f.batch, o)
		default:
			return
		}
	}
}

// ends counts the batch's attempts as ended, releases their permits, and
// returns the ends to record: all but those lost (the process was
// declared dead meanwhile).
func (f *feeder) ends() []outcomeReq {
	s := f.s
	var ends []outcomeReq
	for _, o := range f.batch {
		f.outstanding--
		if !o.lost {
			ends = append(ends, o)
		}
		if s.lim != nil {
			s.finishPermit(o)
		}
	}
	if s.lim != nil && len(f.batch) > 0 {
		// Freed before the ends are recorded: the handlers returned,
		// and this call's takes go with the ends in one script call.
		s.lim.free()
	}
	return ends
}

// permits starts a round that asks for n tasks. With a limit, it takes
// the permits first, and asks for as many tasks as it got: a task the
// limit does not allow is never marked in flight. Refused, it waits for
// the next release (limited).
func (f *feeder) permits(n int) round {
	s := f.s
	if n <= 0 || s.lim == nil {
		return round{n: n}
	}
	ch := s.lim.released()
	toks := s.lim.acquire(s.part, n, f.demand)
	f.limited = nil
	if len(toks) < n {
		f.limited = ch
	}
	return round{n: len(toks), toks: toks}
}

// exchange records ends and takes r.n tasks, in one script call
// (Server.record); with neither, it calls nothing.
func (f *feeder) exchange(r *round, ends []outcomeReq) {
	if r.n > 0 {
		// A wake-up that came before this take is answered by it.
		select {
		case <-f.s.q.wake:
		default:
		}
	}
	if len(ends) > 0 || r.n > 0 {
		r.tasks, r.next, r.err = f.s.record(f.ctx, ends, r.n)
	}
}

// retire forgets the batch's attempts, recorded now, and empties it. Only
// now: until recorded, an attempt must not look like a task marked in
// flight here that nobody runs (checkOrphans).
func (f *feeder) retire() {
	s := f.s
	s.mu.Lock()
	for _, o := range f.batch {
		delete(s.running, o.t.ID)
	}
	s.mu.Unlock()
	f.batch = f.batch[:0]
}

// attach gives each task taken its permit, and releases the permits left
// over.
func (f *feeder) attach(r round) {
	for i := range r.toks[:min(len(r.toks), len(r.tasks))] {
		r.tasks[i].tok = r.toks[i]
	}
	if len(r.toks) > len(r.tasks) {
		for _, t := range r.toks[len(r.tasks):] {
			t.Ignore()
		}
		f.s.lim.free()
	}
}

// learn notes what the round tells of the queue: whether it may have
// tasks for more permits (demand), and whether the limit is what holds
// the workers back (limited).
func (f *feeder) learn(r round) {
	if r.err == nil {
		f.demand = len(r.tasks) == r.n && r.n > 0 || f.demand && r.n == 0
	}
	if len(r.tasks) < r.n {
		// Fewer tasks than permits: the limit is not what holds the
		// workers back, a release should not wake this feed (two
		// servers with empty queues would wake each other for ever).
		f.limited = nil
	}
}

// handOut puts the tasks taken in ready, for the first idle workers.
func (f *feeder) handOut(tasks []*Task) {
	f.outstanding += len(tasks)
	for _, t := range tasks {
		f.s.ready <- t // never blocks: outstanding <= cap(s.ready)
	}
}

// stopIfDrained stops a server in ModeDrain once a take found less than
// it asked for and none of its tasks is in flight.
func (f *feeder) stopIfDrained(r round) {
	s := f.s
	if r.err == nil && r.n > 0 && len(r.tasks) < r.n && f.outstanding == 0 && f.stopping != nil && s.Mode() == ModeDrain {
		// Drained: nothing it may run now, nothing in flight.
		f.stopping = nil
		s.stopOnce.Do(func() { close(s.stopping) }) // SetMode says ErrStopped from now on
		go func() { _ = s.Stop(context.Background()) }()
	}
}

// schedule decides when to take again: at once while takes get all they
// ask for; at the next release of a permit when the limit is what holds
// the workers back; else at a wake-up, an end, or the timer: when the
// next delayed task is due, after safetyPoll, or after a backoff when the
// call failed.
func (f *feeder) schedule(r round) {
	if r.err == nil {
		f.fails = 0
		f.bo.Reset()
	}
	if f.limited != nil && r.err == nil && len(r.tasks) == r.n {
		// The limit is the bottleneck: take again at the next release
		// (or a wake-up; the timer in case a partition's reserved
		// share, not a task, stands in the way).
		f.canTake = false
		f.timer.Reset(limitPoll)
		return
	}
	if len(r.tasks) == r.n {
		if r.n > 0 {
			f.canTake = true // there may be more
		}
		return
	}
	f.canTake = false
	wait := safetyPoll
	switch {
	case r.err != nil:
		f.fails++
		wait = f.bo.Next()
		switch {
		case errors.Is(r.err, errGone) || errors.Is(r.err, errLate):
			// The keep-alive says what happened, once.
			f.s.q.logger.Debug("not taking tasks until the process is registered again", "error", r.err)
		case f.ctx.Err() == nil && f.fails <= 3 || f.fails%20 == 0:
			f.s.q.logger.Warn("taking tasks failed", "error", r.err, "failures", f.fails)
		}
	case r.next >= 0 && r.next < wait:
		wait = r.next
	}
	f.timer.Reset(wait)
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
