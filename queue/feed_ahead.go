package queue

import (
	"context"
	"time"
)

// How many tasks the feed asks for, taking ahead on its own (aheadDepth),
// and the give-backs of tasks taken and not started: after maxHeld with
// every worker busy (releaseStale), or a pause.

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
