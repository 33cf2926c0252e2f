package pool

import "time"

// The pool's timeouts, each named once. Those that follow the documented
// options are methods of nodeConfig, and the options' docs say what they
// govern; the others are constants.

// loopCallTimeout bounds one Redis call or pipeline made by a node's
// loops on their own (routing, trimming handled events, one attempt of a
// withdrawal): long enough for a slow Redis, short enough that a loop
// whose Redis hangs gives up and tries again. Calls made for a caller use
// the caller's ctx instead; an admission (DispatchJob), alone or in a
// batch, is bounded by WithCallTimeout (nodeConfig.callTimeout).
const loopCallTimeout = 10 * time.Second

// janitorPassTimeout bounds one pass of the janitor.
const janitorPassTimeout = 10 * time.Second

// shutdownDeleteTimeout bounds the deletion of a pool's keys at the end of
// Shutdown, which goes on after Shutdown's ctx ended.
const shutdownDeleteTimeout = 30 * time.Second

// shutdownWaitTTLs is how many WorkerTTLs old a node's last keep-alive
// may be for Shutdown to wait for it: a node late with its keep-alives
// (a busy machine) is still stopping, and deleting the pool's keys under
// it would let it bring some back.
const shutdownWaitTTLs = 3

// parkedRetry is how often a router tries again the events that found no
// worker (it also tries whenever the slot table changes).
const parkedRetry = time.Second

// keepAliveEvery is how often a node records its and its workers'
// keep-alives, and how long one may take: a third of WorkerTTL, so that a
// keep-alive survives two late ones.
func (c nodeConfig) keepAliveEvery() time.Duration { return c.workerTTL / 3 }

// janitorTick is how often the janitor looks for dead workers and nodes:
// often enough that a dead worker's jobs restart well within WorkerTTL +
// 1s of its last keep-alive.
func (c nodeConfig) janitorTick() time.Duration { return min(c.workerTTL/4, 250*time.Millisecond) }

// recoverEvery is how often the janitor looks for stuck jobs when no
// worker died: a quarter of PendingJobTTL, so that a stuck job is routed
// again within 1.25 PendingJobTTL.
func (c nodeConfig) recoverEvery() time.Duration { return c.pendingJobTTL / 4 }

// recoverShare bounds the Redis time the janitor's periodic walk through
// the job records (recover.go) takes: the wait after a walk is at least
// recoverShare times what it took. A walk reads every record (about 2.5
// µs of Redis CPU a job, 0.27 s at 100,000 jobs), so at a quarter of the
// default PendingJobTTL a pool of a million jobs would keep half a Redis
// core busy; bounded, about a twentieth of one, and a stuck job of such a
// pool is found later than 1.25 PendingJobTTL (within about 20 times a
// walk, a minute or two at a million). A worker's death is not waited
// for: a walk starts at the next janitor pass.
const recoverShare = 20

// nextRecover returns how long the janitor waits after a walk through
// the job records that took took before it starts the next (unless a
// worker dies).
func (c nodeConfig) nextRecover(took time.Duration) time.Duration {
	return max(c.recoverEvery(), recoverShare*took)
}

// startTimeout bounds a start: the Start handler's ctx, and the claim and
// record around it. PendingJobTTL: past it, the pool takes the start for
// stuck and routes the job again.
func (c nodeConfig) startTimeout() time.Duration { return c.pendingJobTTL }

// notifyTimeout bounds a HandleNotification call (its ctx) and its answer.
func (c nodeConfig) notifyTimeout() time.Duration { return c.pendingJobTTL }

// stopTimeout bounds every Stop handler call: StopJob's, a move's,
// RemoveWorker's, Close's and Shutdown's. A Stop that ignores its ctx is
// left running (see stopHeld).
func (c nodeConfig) stopTimeout() time.Duration { return c.workerShutdownTTL }

// routerAckGrace is how long a job event may stay unacknowledged by a
// live router before another router takes it: a backstop, since a dead
// router's events are taken over as soon as its node is declared dead.
func (c nodeConfig) routerAckGrace() time.Duration { return c.pendingJobTTL }
