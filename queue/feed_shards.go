package queue

import (
	"time"
)

// Which shard the feed takes from, and when it looks again: a shard is
// looked at after a wake-up or its due time, taken from for shardTurnEvery
// rounds, and given a due time by what its last take found.

// canTake tells whether a shard may have tasks for this server.
func (f *feeder) canTake() bool {
	for _, ok := range f.look {
		if ok {
			return true
		}
	}
	return false
}

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

// safetyPoll bounds how long an idle feed trusts that a wake-up would
// have come: pub/sub messages published during a reconnect are lost.
const safetyPoll = time.Second
