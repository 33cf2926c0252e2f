package queue

import (
	"context"
	"errors"
	"runtime"
	"time"

	"github.com/shepherd-go/shepherd/internal/backoff"
	"github.com/shepherd-go/shepherd/internal/script"
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
	defer f.holdTimer.Stop()
	for f.open || len(f.batch) > 0 || f.unrecorded() {
		f.absorbWakes()
		f.absorbAnswers()
		f.absorbPause()
		if len(f.batch) == 0 && (!f.canTake() || f.want() == 0) && !f.launchable() && !f.wait() {
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
	// pending holds, per shard, the ends to record apart from the
	// round's call (side): those of a shard the round does not call,
	// and those of a sick shard, whose last call failed. A sick shard
	// is not taken from (look stays false) until a side call answers,
	// made once it is due again. One side call at most per shard is out
	// (calling), its answer on answers; the feed goes on meanwhile, so
	// that a shard whose Redis hangs holds back no other.
	pending  [][]outcomeReq
	sick     []bool
	calling  []bool
	answers  chan sideAnswer
	limited  <-chan struct{} // the limit refused permits: closed at the next release
	demand   bool            // the queue may have tasks for more permits: a wake-up, or the last take filled its permits
	stopping <-chan struct{} // s.stopping, nil once it closed (or the server drained)
	open     bool            // s.outcomes is open
	batch    []outcomeReq    // ends to record

	// Taking ahead on its own (Server.aheadMax > 0): full is whether
	// the last take got all the workers wanted, not counting what it took
	// ahead (asked): the queue has a backlog, and only then does it take
	// ahead; holdOff is set when it gave back what waited too long
	// (releaseStale), until a worker ends an attempt; waitingSince is when
	// tasks last began to wait in ready with none waiting before.
	full         bool
	asked        int // of the last want, taken ahead on its own
	holdOff      bool
	waitingSince time.Time
	holdTimer    *time.Timer
}

// round is what one round of feed asked for and got.
type round struct {
	takes    []shardTake   // per shard called
	recorded []outcomeReq  // ends recorded (or given up at Close)
	n        int           // tasks asked for: the workers' want, or the permits the limit gave
	toks     []limit.Token // the permits, with a limit
	tasks    []*Task       // taken
	err      error         // a call failed
	// drain: the server was in ModeDrain when the round began. Only such
	// a round's take can show it drained (stopIfDrained): one begun
	// before may have read Redis before tasks the drain must run were
	// queued.
	drain bool
}

// sideAnswer is how a side call went: the ends it carried, and whether
// they were recorded.
type sideAnswer struct {
	shard    int
	batch    []outcomeReq
	recorded bool
	err      error
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
		s:         s,
		ctx:       s.feedCtx,
		timer:     time.NewTimer(time.Hour),
		holdTimer: time.NewTimer(time.Hour),
		bo:        make([]backoff.Backoff, len(all)),
		pending:   make([][]outcomeReq, len(all)),
		sick:      make([]bool, len(all)),
		calling:   make([]bool, len(all)),
		answers:   make(chan sideAnswer, len(all)),
		fails:     make([]int, len(all)),
		shards:    all,
		look:      make([]bool, len(all)),
		due:       make([]time.Time, len(all)),
		demand:    true,
		stopping:  s.stopping,
		open:      true,
		batch:     make([]outcomeReq, 0, maxRecordBatch),
	}
	for i := range f.look {
		f.look[i] = true
		f.bo[i] = backoff.Backoff{Min: 100 * time.Millisecond, Max: 2 * time.Second}
	}
	f.cur = shardOfKey(s.q.proc, len(all)) // processes start on different shards
	f.timer.Stop()
	f.holdTimer.Stop()
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

// unrecorded tells whether ends wait to be recorded apart from the
// rounds' calls, or a side call is out. Once the feed's ctx ends (Close,
// or Stop giving up) a side call out no longer counts: go-redis may hold
// a call to a frozen server past its ctx, and its answer finds room in
// f.answers.
func (f *feeder) unrecorded() bool {
	for i, p := range f.pending {
		if len(p) > 0 || f.calling[i] && f.ctx.Err() == nil {
			return true
		}
	}
	return false
}

// anySick tells whether a shard's last call failed and no side call
// has answered since.
func (f *feeder) anySick() bool {
	for _, sick := range f.sick {
		if sick {
			return true
		}
	}
	return false
}

// sideDue tells whether shard i is due a side call: it has none out,
// and it is sick and due again (a probe, with its ends if any; at
// Close, at once, to give its ends up), or it has ends to record.
func (f *feeder) sideDue(i int, now time.Time) bool {
	switch {
	case f.calling[i]:
		return false
	case f.sick[i]:
		return f.ctx.Err() != nil && len(f.pending[i]) > 0 || !f.due[i].IsZero() && !now.Before(f.due[i])
	default:
		return len(f.pending[i]) > 0
	}
}

// launchable tells whether a side call is due.
func (f *feeder) launchable() bool {
	now := time.Now()
	for i := range f.pending {
		if f.sideDue(i, now) {
			return true
		}
	}
	return false
}

// launch makes the side calls due, each in a goroutine of its own that
// answers on f.answers: a shard's pending ends, or for a sick shard with
// none, a read that tells whether it answers again.
func (f *feeder) launch() {
	now := time.Now()
	for i := range f.pending {
		if !f.sideDue(i, now) {
			continue
		}
		batch, l := f.pending[i], f.shards[i]
		f.pending[i], f.calling[i] = nil, true
		if f.sick[i] {
			// Its backoff is over. A shard that is not sick keeps its due
			// time (its next delayed task's, or safetyPoll's): it was
			// cleared here, and a shard not looked at whose ends went in a
			// side call was then never taken from again without a wake-up
			// (TestShardSafetyPollSurvivesASideCall, TestAMoveLongerThanTheTTL).
			f.due[i] = time.Time{}
		}
		go func() {
			a := sideAnswer{shard: i, batch: batch}
			if len(batch) == 0 {
				cctx, cancel := context.WithTimeout(f.ctx, loopCallTimeout)
				// With the slot guard: refused, as the scripts are, while
				// the shard's slot moves (script.WithGuard).
				a.err = f.s.q.rdb.Exists(cctx, script.WithGuard([]string{l.settings})...).Err()
				cancel()
			} else {
				_, _, a.recorded, a.err = f.s.record(f.ctx, l, batch, 0)
			}
			f.answers <- a
		}()
	}
}

// absorbAnswers takes in the side calls' answers that came.
func (f *feeder) absorbAnswers() {
	for {
		select {
		case a := <-f.answers:
			f.absorb(a)
		default:
			return
		}
	}
}

// absorb takes in a side call's answer: the ends it recorded are
// forgotten, and a sick shard that answered is taken from again; the
// ends of a call that failed wait for the shard's next side call, after
// its backoff.
func (f *feeder) absorb(a sideAnswer) {
	i := a.shard
	f.calling[i] = false
	switch {
	case a.err == nil:
		f.forget(a.batch)
		if len(a.batch) > 0 && !f.sick[i] && f.s.Mode() == ModeDrain {
			// Draining: the ends may have made tasks available here
			// (stopIfDrained).
			f.look[i], f.due[i] = true, time.Time{}
		}
		if f.sick[i] {
			// Its backoff goes on until a take succeeds: a process
			// declared dead there is refused until it joins again.
			f.sick[i] = false
			f.look[i], f.due[i] = true, time.Time{}
		}
	case f.ctx.Err() != nil:
		// Given up (Close, or Stop: giveUp): the tasks go back (Stop's
		// give-back, Close's deregistration, or a keep-alive's).
		f.drop(a.batch)
	default:
		f.pending[i] = append(a.batch, f.pending[i]...)
		f.failed(i, a.err)
		f.resetTimer()
	}
}

// drop gives up ends that cannot be recorded (the feed's ctx ended):
// their tasks stay marked in flight here until given back; the server
// keeps their ids for that (Server.dropped).
func (f *feeder) drop(batch []outcomeReq) {
	endUnrecorded(batch)
	f.forget(batch)
	s := f.s
	s.mu.Lock()
	for _, o := range batch {
		s.dropped[o.t.shard] = append(s.dropped[o.t.shard], o.t.ID)
	}
	s.mu.Unlock()
}

// forget forgets the attempts whose ends are recorded (or given up).
// Only then: until recorded, an attempt must not look like a task
// marked in flight here that nobody runs (checkOrphans).
func (f *feeder) forget(recorded []outcomeReq) {
	if len(recorded) == 0 {
		return
	}
	s := f.s
	s.mu.Lock()
	for _, o := range recorded {
		delete(s.running, o.t.ID)
	}
	s.mu.Unlock()
}

// failed makes shard i sick after a failed call: not taken from, its
// ends kept, until a side call after its backoff answers.
func (f *feeder) failed(i int, err error) {
	f.fails[i]++
	moving := script.Moving(err)
	switch {
	case errors.Is(err, errGone) || errors.Is(err, errLate):
		// The keep-alive says what happened, once.
		f.s.q.logger.Debug("not taking tasks until the process is registered again", "error", err, "shard", i)
	case moving:
		if f.fails[i] == 1 {
			f.s.q.logger.Info("the shard's slot is moving to another Redis Cluster master; taking from it again once it has moved", "shard", i)
		}
	case f.ctx.Err() == nil && f.fails[i] <= 3 || f.fails[i]%20 == 0:
		f.s.q.logger.Warn("recording ends or taking tasks failed; the shard is tried again after a backoff", "error", err, "failures", f.fails[i], "shard", i)
	}
	f.sick[i] = true
	wait := movingRetry
	if !moving {
		wait = f.bo[i].Next()
	}
	f.look[i], f.due[i] = false, time.Now().Add(wait)
}

// movingRetry is how often a process tries a shard whose slot is moving
// to another master: no failure to back off from (Redis refuses the
// call before running it, cheaply), and its tasks should go on soon
// after the move. go-redis tries each call a few times more itself.
const movingRetry = 50 * time.Millisecond

// lookAll makes every shard worth a take, but the sick ones.
func (f *feeder) lookAll() {
	for i := range f.look {
		if !f.sick[i] {
			f.look[i], f.due[i] = true, time.Time{}
		}
	}
}

// absorbWakes makes the shards woken since the last round worth a take,
// but the sick ones.
func (f *feeder) absorbWakes() {
	for i := range f.look {
		if f.s.q.woken[i].Swap(false) && !f.sick[i] {
			f.look[i], f.due[i], f.demand = true, time.Time{}, true
		}
	}
}

// lookDue makes the shards whose due time passed worth a take, but the
// sick ones: they are due a side call (launch).
func (f *feeder) lookDue() {
	now := time.Now()
	for i, d := range f.due {
		if !f.sick[i] && !d.IsZero() && !now.Before(d) {
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
	f.asked = 0
	if n > 0 && f.s.lim == nil {
		f.asked = f.aheadDepth(n)
		n += f.s.cfg.prefetch + f.asked
	}
	return max(n-f.outstanding, 0)
}

// aheadHorizon is how far ahead a process takes on its own: as many
// tasks as its workers end in about this time (aheadDepth). It bounds
// what taking ahead costs the tasks: one waits in a busy process about
// this long, when another process may have had an idle worker.
const aheadHorizon = 5 * time.Millisecond

// aheadPerWorker bounds, per worker, the tasks taken ahead on its own.
const aheadPerWorker = 8

// maxHeld is how long tasks taken ahead on its own wait while no worker
// picks one (all busy with something long) before they go back to the
// queue (releaseStale).
const maxHeld = 100 * time.Millisecond

// aheadDepth is how many tasks to take ahead on its own for avail
// workers with an open resource: none without a backlog (the last take
// got less than the workers wanted, not counting what it took ahead),
// after a give-back of tasks that waited too long until an attempt
// ends, or before a run time is known; else as many as they end in
// aheadHorizon at their recent run times, up to aheadMax. Short tasks
// then go in batches of up to 9 per worker (ends and takes in one call
// each), which is what costs Redis least per task (BENCHMARKS.md,
// "Taking ahead"); tasks that run longer than avail × aheadHorizon are
// not taken ahead.
func (f *feeder) aheadDepth(avail int) int {
	s := f.s
	if s.aheadMax == 0 || !f.full || f.holdOff {
		return 0
	}
	avg := s.took.recent()
	if avg <= 0 {
		return 0
	}
	return int(min(int64(avail)*int64(aheadHorizon)/int64(avg), int64(s.aheadMax)))
}

// staleAt is when the tasks waiting have waited maxHeld with no worker
// picking one.
func (f *feeder) staleAt() time.Time {
	at := f.waitingSince
	if p := time.Unix(0, f.s.picked.Load()); p.After(at) {
		at = p
	}
	return at.Add(f.s.cfg.maxHeld)
}

// releaseStale gives back to the queue, no attempt used, the tasks taken
// that wait in ready: they waited maxHeld with every worker busy, when
// another process may have idle ones. Nothing more is taken ahead until
// an attempt ends.
func (f *feeder) releaseStale() {
	n := f.releaseWaiting()
	f.s.q.m.aheadGivenBack.Add(context.Background(), int64(n), f.s.q.m.attrs)
	f.s.q.logger.Debug("gave back tasks taken ahead: every worker has been busy", "tasks", n, "waited", f.s.cfg.maxHeld)
}

// absorbPause gives back what waits in ready if a pause was seen
// (Server.pauseSeen) since the last round.
func (f *feeder) absorbPause() {
	select {
	case <-f.s.paused:
		f.pause()
	default:
	}
}

// pause gives back, after a pause of the queue or a tenant, the tasks
// taken that no worker has started: none of them starts during the
// pause (a tenant's pause gives back the other tenants' too; they are
// taken again).
func (f *feeder) pause() {
	if n := f.releaseWaiting(); n > 0 {
		f.s.q.logger.Debug("gave back tasks taken and not started: the queue or a tenant was paused", "tasks", n)
	}
}

// releaseWaiting gives back to the queue, no attempt used, the tasks
// taken that wait in ready for a worker (after maxHeld, or a pause:
// taken ahead or not, with WithPrefetch or not), and returns how many.
// Nothing more is taken ahead until an attempt ends.
func (f *feeder) releaseWaiting() int {
	var back []*Task
	for {
		select {
		case t := <-f.s.ready:
			back = append(back, t)
			continue
		default:
		}
		break
	}
	for _, t := range back {
		f.batch = append(f.batch, outcomeReq{t: t, kind: "release"})
	}
	f.holdOff = true
	return len(back)
}

// wait blocks until something happens: an attempt's end (it returns true,
// the end in the batch), or a reason to look again (false): the outcomes
// closed, a wake-up, the timer, a permit released, a worker's resource
// opened, the mode changed, or Stop. Wake-ups and the timer count only
// while it wants tasks.
func (f *feeder) wait() bool {
	s := f.s
	if !f.open && !f.unrecorded() {
		// Nothing left: the last side call's answer was taken in
		// (absorbAnswers) after the loop checked. Waiting now would wait
		// for ever, nothing being left to wake it, and Stop with it.
		return false
	}
	var wake <-chan struct{}
	var tick <-chan time.Time
	if f.want() > 0 {
		wake, tick = s.q.wake, f.timer.C
	}
	if f.unrecorded() {
		tick = f.timer.C // a sick shard is due a side call again
	}
	outcomes := s.outcomes
	if !f.open {
		outcomes = nil // closed: only unrecorded ends keep the feed
	}
	// Taking ahead on its own, what waits too long goes back
	// (releaseStale).
	var stale <-chan time.Time
	if s.aheadMax > 0 && len(s.ready) > 0 {
		d := time.Until(f.staleAt())
		if d <= 0 {
			f.releaseStale()
			return true
		}
		f.holdTimer.Reset(d)
		defer f.holdTimer.Stop()
		stale = f.holdTimer.C
	}
	select {
	case <-stale:
		if len(s.ready) > 0 && !time.Now().Before(f.staleAt()) {
			f.releaseStale()
			return true
		}
	case a := <-f.answers:
		f.absorb(a)
	case o, ok := <-outcomes:
		if !ok {
			f.open = false
			return false
		}
		f.batch = append(f.batch, o)
		f.holdOff = false
		return true
	case <-wake:
		f.absorbWakes()
		f.demand = true
	case <-tick:
		f.lookDue()
		f.resetTimer() // for the dues still to come: a round may not follow
	case <-f.limited:
		f.limited = nil
		f.lookAll()
	case <-s.availed:
	case <-s.paused:
		f.pause()
		return len(f.batch) > 0
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
			if !f.sick[i] {
				f.look[i], f.due[i] = false, time.Now().Add(limitPoll)
			}
		}
		f.resetTimer()
		return
	}
	for _, tk := range r.takes {
		i := tk.shard
		if tk.err != nil {
			f.failed(i, tk.err)
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
// tasks wait that many of its rounds at most (invariant 15). Each move
// leaves the previous shard's ends to side calls of their own: TS
// measured the busiest master's CPU per task at a median 0.44 of one
// shard's with 8, 0.42 with 32 and 0.41 with 64 (BENCHMARKS.md).
const shardTurnEvery = 32

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
