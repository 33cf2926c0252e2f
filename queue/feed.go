package queue

import (
	"context"
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
