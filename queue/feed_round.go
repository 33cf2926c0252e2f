package queue

import (
	"context"
	"runtime"
	"time"

	"github.com/shepherd-go/shepherd/limit"
)

// The steps of one round of the feed, in the order feed runs them: the
// ends gathered, their permits released, permits taken, ends recorded and
// tasks taken in one call (exchange), the tasks handed out.

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
			f.holdOff = false
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
	drain := s.Mode() == ModeDrain
	if n <= 0 || s.lim == nil {
		return round{n: n, drain: drain}
	}
	ch := s.lim.released()
	toks := s.lim.acquire(s.part, n, f.demand)
	f.limited = nil
	if len(toks) < n {
		f.limited = ch
	}
	return round{n: len(toks), toks: toks, drain: drain}
}

// exchange records ends and takes r.n tasks in one script call
// (Server.record) to one shard, c: the shard to take from (takeShard;
// when no shard may have tasks, the first end's shard, else the home
// shard; never a sick one). The ends of the
// other shards go to pending, for side calls (launch), as do c's when
// the call fails: the round waits for no other shard. With neither ends
// nor tasks to take in c, it calls nothing.
func (f *feeder) exchange(r *round, ends []outcomeReq) {
	c := f.takeShard()
	if c < 0 {
		// No shard is known to have tasks: take anyway, from the first
		// end's shard or the home shard, as an unsharded queue takes
		// with every call.
		switch {
		case len(ends) > 0 && !f.sick[ends[0].t.shard]:
			c = ends[0].t.shard
		case !f.sick[0]:
			c = 0
		}
	}
	var batch []outcomeReq
	for _, o := range ends {
		if i := o.t.shard; i == c {
			batch = append(batch, o)
		} else {
			f.pending[i] = append(f.pending[i], o)
		}
	}
	if c >= 0 && !f.calling[c] && len(f.pending[c]) > 0 {
		batch = append(f.pending[c], batch...)
		f.pending[c] = nil
	}
	f.launch()
	n := r.n
	if c < 0 || len(batch) == 0 && n == 0 {
		return
	}
	if n > 0 {
		// A wake-up of the shard that came before this take is
		// answered by it.
		f.s.q.woken[c].Store(false)
	}
	tasks, next, ok, err := f.s.record(f.ctx, f.shards[c], batch, n)
	switch {
	case ok || len(batch) == 0:
		r.recorded = batch
	case f.ctx.Err() != nil:
		// Given up, as in absorb.
		f.drop(batch)
	default:
		f.pending[c] = append(batch, f.pending[c]...)
	}
	r.err = err
	r.tasks = tasks
	r.takes = append(r.takes, shardTake{shard: c, n: n, got: len(tasks), next: next, err: err})
}

// retire forgets the attempts recorded now (and those lost), and
// empties the batch; the ends pending stay (forget).
func (f *feeder) retire(r round) {
	s := f.s
	s.mu.Lock()
	for _, o := range f.batch {
		if o.lost {
			delete(s.running, o.t.ID)
		}
	}
	s.mu.Unlock()
	f.forget(r.recorded)
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
		if r.n > 0 {
			// A backlog: more tasks than the workers' own want.
			f.full = len(r.tasks) >= max(r.n-f.asked, 1)
		}
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
	if len(tasks) > 0 && len(f.s.ready) == 0 {
		f.waitingSince = time.Now()
	}
	f.outstanding += len(tasks)
	for _, t := range tasks {
		f.s.ready <- t // never blocks: outstanding <= cap(s.ready)
	}
}

// stopIfDrained stops a server in ModeDrain once a take begun in that
// mode (round.drain) found less than it asked for, none of its tasks is
// in flight, and every end is recorded: an end still to record (in a side call) may make tasks
// available again (a tenant below its capacity, a retry), and its shard
// is looked at again once it is (absorb).
func (f *feeder) stopIfDrained(r round) {
	s := f.s
	if s.cfg.afterRound != nil {
		s.cfg.afterRound(r)
	}
	if r.err == nil && r.drain && r.n > 0 && len(r.tasks) < r.n && !f.canTake() && !f.anySick() && f.outstanding == 0 && !f.unrecorded() && f.stopping != nil && s.Mode() == ModeDrain {
		// Drained: nothing it may run now, nothing in flight.
		f.stopping = nil
		s.stopOnce.Do(func() { close(s.stopping) }) // SetMode says ErrStopped from now on
		go func() { _ = s.Stop(context.Background()) }()
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
