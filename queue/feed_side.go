package queue

import (
	"context"
	"errors"
	"time"

	"github.com/shepherd-go/shepherd/internal/script"
)

// The feed's side calls: a shard's ends recorded apart from the round's
// call (those of a shard the round does not take from, and a sick shard's),
// and how a shard that failed is tried again.

// sideAnswer is how a side call went: the ends it carried, and whether
// they were recorded.
type sideAnswer struct {
	shard    int
	batch    []outcomeReq
	recorded bool
	err      error
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
