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
	for f.open || len(f.batch) > 0 || f.unrecorded() {
		f.absorbWakes()
		if len(f.batch) == 0 && (!f.canTake() || f.want() == 0) && !f.pendingDue() && !f.wait() {
			continue // no end to record: look again
		}
		f.gather()
		ends := f.ends()
		r := f.permits(f.want())
		f.exchange(&r, ends)
		f.retire(r)
		f.attach(r)
		f.learn(r)
		f.handOut(r.tasks)
		f.schedule(r)
		f.stopIfDrained(r)
	}
}

// feeder is feed's state between rounds.
type feeder struct {
	s *Server
	// ctx is not s.hard: a take cut off by Halt would leave tasks marked
	// in flight that nobody runs (Stop gives them back, but only then).
	ctx   context.Context
	timer *time.Timer       // when to take again without a wake-up (schedule)
	bo    []backoff.Backoff // per shard, after failed takes
	fails []int             // per shard: takes failed in a row

	outstanding int // taken, their end not recorded yet
	// Per shard: look is false after a take that got fewer than asked
	// or failed, until a wake-up of the shard or its due time (due,
	// zero while look); takes stay on cur for shardTurnEvery rounds,
	// then go round the shards that look.
	shards []layout
	look   []bool
	due    []time.Time
	cur    int
	rounds int // rounds since the feed began
	// pending holds, per shard, the ends its Redis did not take (the
	// call failed): tried again, with the shard's new ends, once the
	// shard is due again; the other shards go on meanwhile.
	pending  [][]outcomeReq
	limited  <-chan struct{} // the limit refused permits: closed at the next release
	demand   bool            // the queue may have tasks for more permits: a wake-up, or the last take filled its permits
	stopping <-chan struct{} // s.stopping, nil once it closed (or the server drained)
	open     bool            // s.outcomes is open
	batch    []outcomeReq    // ends to record
}

// round is what one round of feed asked for and got.
type round struct {
	takes    []shardTake   // per shard called
	recorded []outcomeReq  // ends recorded (or given up at Close)
	n        int           // tasks asked for: the workers' want, or the permits the limit gave
	toks     []limit.Token // the permits, with a limit
	tasks    []*Task       // taken
	err      error         // a call failed
}

// shardTake is what one shard's call of a round asked for and got.
type shardTake struct {
	shard, n, got int
	next          time.Duration // when the shard's next delayed task is due (-1: none)
	err           error
}

func (s *Server) newFeeder() *feeder {
	all := s.q.known()
	f := &feeder{
		s:        s,
		ctx:      s.q.tasks.Context(),
		timer:    time.NewTimer(time.Hour),
		bo:       make([]backoff.Backoff, len(all)),
		pending:  make([][]outcomeReq, len(all)),
		fails:    make([]int, len(all)),
		shards:   all,
		look:     make([]bool, len(all)),
		due:      make([]time.Time, len(all)),
		demand:   true,
		stopping: s.stopping,
		open:     true,
		batch:    make([]outcomeReq, 0, maxRecordBatch),
	}
	for i := range f.look {
		f.look[i] = true
		f.bo[i] = backoff.Backoff{Min: 100 * time.Millisecond, Max: 2 * time.Second}
	}
	f.cur = shardOfKey(s.q.proc, len(all)) // processes start on different shards
	f.timer.Stop()
	return f
}

// canTake tells whether a shard may have tasks for this server.
func (f *feeder) canTake() bool {
	for _, ok := range f.look {
		if ok {
			return true
		}
	}
	return false
}

// unrecorded tells whether ends wait to be recorded in a shard that did
// not answer.
func (f *feeder) unrecorded() bool {
	for _, p := range f.pending {
		if len(p) > 0 {
			return true
		}
	}
	return false
}

// pendingDue tells whether a shard with unrecorded ends is due again.
func (f *feeder) pendingDue() bool {
	for i, p := range f.pending {
		if len(p) > 0 && f.look[i] {
			return true
		}
	}
	return false
}

// lookAll makes every shard worth a take.
func (f *feeder) lookAll() {
	for i := range f.look {
		f.look[i], f.due[i] = true, time.Time{}
	}
}

// absorbWakes makes the shards woken since the last round worth a take.
func (f *feeder) absorbWakes() {
	for i := range f.look {
		if f.s.q.woken[i].Swap(false) {
			f.look[i], f.due[i], f.demand = true, time.Time{}, true
		}
	}
}

// lookDue makes the shards whose due time passed worth a take.
func (f *feeder) lookDue() {
	now := time.Now()
	for i, d := range f.due {
		if !d.IsZero() && !now.Before(d) {
			f.look[i], f.due[i] = true, time.Time{}
		}
	}
}

// takeShard is the shard to take from this round: the current one while
// it may have tasks, for shardTurnEvery rounds, then the next one round
// the shards that may (-1: none may). Taking from one shard at a time
// keeps a round's ends in one shard, and so its calls to one.
func (f *feeder) takeShard() int {
	n := len(f.look)
	f.rounds++
	if f.look[f.cur] && (n == 1 || f.rounds%shardTurnEvery != 0) {
		return f.cur
	}
	for k := 1; k <= n; k++ {
		if i := (f.cur + k) % n; f.look[i] {
			f.cur = i
			return i
		}
	}
	return -1
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
	if f.unrecorded() {
		tick = f.timer.C // a shard with ends to record is due again
	}
	outcomes := s.outcomes
	if !f.open {
		outcomes = nil // closed: only unrecorded ends keep the feed
	}
	select {
	case o, ok := <-outcomes:
		if !ok {
			f.open = false
			return false
		}
		f.batch = append(f.batch, o)
		return true
	case <-wake:
		f.absorbWakes()
		f.demand = true
	case <-tick:
		f.lookDue()
	case <-f.limited:
		f.limited = nil
		f.lookAll()
	case <-s.availed:
	case <-s.modeSet:
		f.lookAll() // a server switched to drain looks once more, then stops
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

// exchange records ends and takes r.n tasks, with one script call per
// shard (Server.record): the take goes with the ends of its shard
// (takeShard; when no shard may have tasks, the first end's shard, or the
// home shard), the ends of each other shard in a call of their own. The
// ends of a shard whose call failed wait in pending, with the shard's
// later ends, until it is due again (schedule); the other shards go on.
// With neither ends nor tasks to take, it calls nothing.
func (f *feeder) exchange(r *round, ends []outcomeReq) {
	t := f.takeShard()
	if t < 0 && len(ends) > 0 {
		t = ends[0].t.shard
	} else if t < 0 {
		t = 0
	}
	byShard := make(map[int][]outcomeReq)
	var order []int
	add := func(i int, os ...outcomeReq) {
		if _, ok := byShard[i]; !ok {
			order = append(order, i)
		}
		byShard[i] = append(byShard[i], os...)
	}
	for i, p := range f.pending {
		if len(p) > 0 && f.look[i] {
			add(i, p...)
			f.pending[i] = nil
		}
	}
	for _, o := range ends {
		if i := o.t.shard; len(f.pending[i]) > 0 {
			f.pending[i] = append(f.pending[i], o) // its shard is not due yet
		} else {
			add(i, o)
		}
	}
	if _, ok := byShard[t]; !ok && r.n > 0 && len(f.pending[t]) == 0 {
		add(t)
	}
	for _, i := range order {
		n := 0
		if i == t {
			n = r.n
		}
		if n > 0 {
			// A wake-up of the shard that came before this take is
			// answered by it.
			f.s.q.woken[i].Store(false)
		}
		batch := byShard[i]
		tasks, next, ok, err := f.s.record(f.ctx, f.shards[i], batch, n)
		switch {
		case ok || len(batch) == 0:
			r.recorded = append(r.recorded, batch...)
		case f.ctx.Err() != nil:
			// The Queue closes: its deregistration gives the tasks back.
			endUnrecorded(batch)
			r.recorded = append(r.recorded, batch...)
		default:
			f.pending[i] = batch
		}
		if err != nil && r.err == nil {
			r.err = err
		}
		r.tasks = append(r.tasks, tasks...)
		r.takes = append(r.takes, shardTake{shard: i, n: n, got: len(tasks), next: next, err: err})
	}
}

// retire forgets the attempts recorded now (and those lost), and
// empties the batch. Only now: until recorded, an attempt must not look
// like a task marked in flight here that nobody runs (checkOrphans); the
// ends still pending stay.
func (f *feeder) retire(r round) {
	s := f.s
	s.mu.Lock()
	for _, o := range f.batch {
		if o.lost {
			delete(s.running, o.t.ID)
		}
	}
	for _, o := range r.recorded {
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
	if r.err == nil && r.n > 0 && len(r.tasks) < r.n && !f.canTake() && f.outstanding == 0 && f.stopping != nil && s.Mode() == ModeDrain {
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
// call failed. Each shard on its own: a shard whose Redis does not answer
// waits its backoff, the others go on.
func (f *feeder) schedule(r round) {
	if f.limited != nil && r.err == nil && len(r.tasks) == r.n {
		// The limit is the bottleneck: take again at the next release
		// (or a wake-up; the timer in case a partition's reserved
		// share, not a task, stands in the way).
		for i := range f.look {
			f.look[i], f.due[i] = false, time.Now().Add(limitPoll)
		}
		f.resetTimer()
		return
	}
	for _, tk := range r.takes {
		i := tk.shard
		if tk.err != nil {
			f.fails[i]++
			switch {
			case errors.Is(tk.err, errGone) || errors.Is(tk.err, errLate):
				// The keep-alive says what happened, once.
				f.s.q.logger.Debug("not taking tasks until the process is registered again", "error", tk.err, "shard", i)
			case f.ctx.Err() == nil && f.fails[i] <= 3 || f.fails[i]%20 == 0:
				f.s.q.logger.Warn("recording ends or taking tasks failed; the shard is tried again after a backoff", "error", tk.err, "failures", f.fails[i], "shard", i)
			}
			f.look[i], f.due[i] = false, time.Now().Add(f.bo[i].Next())
			continue
		}
		f.fails[i] = 0
		f.bo[i].Reset()
		switch {
		case tk.n == 0:
		case tk.got == tk.n:
			f.look[i], f.due[i] = true, time.Time{} // there may be more
		default:
			w := safetyPoll
			if tk.next >= 0 && tk.next < w {
				w = tk.next
			}
			f.look[i], f.due[i] = false, time.Now().Add(w)
		}
	}
	f.resetTimer()
}

// resetTimer sets the timer to the earliest due time of the shards not
// looked at; stopped when every shard is.
func (f *feeder) resetTimer() {
	var first time.Time
	for i, d := range f.due {
		if !f.look[i] && !d.IsZero() && (first.IsZero() || d.Before(first)) {
			first = d
		}
	}
	f.timer.Stop()
	select {
	case <-f.timer.C:
	default:
	}
	if !first.IsZero() {
		f.timer.Reset(max(time.Until(first), 0))
	}
}

// shardTurnEvery is how many rounds a server takes from one shard before
// it moves on to the next shard that may have tasks: another shard's
// tasks wait that many of its rounds at most (invariant 15).
const shardTurnEvery = 8

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
