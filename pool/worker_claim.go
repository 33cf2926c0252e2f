package pool

import (
	"fmt"
	"strconv"
	"strings"
	"sync"
	"time"
)

// A dispatch routed straight to a live worker with a random id is handed
// to that worker by its admission (admitRouteScript): its record says
// running ("p", record.Pending, one start counted) from then on, and the
// start event carries what claimScript would answer (creation time, span
// context, payload) and who waits (the header). The worker starts the job
// without a claim when the event is fresh by Redis's clock and the worker
// certainly alive, what the claim's own checks would find, and after
// Start answers the dispatcher itself with a plain reply entry
// (answerHanded), without writing the record: one script call a dispatch
// instead of three. Otherwise (an event that waited, a worker that was
// paused or declared dead, a clock too old) it claims the job as before:
// the claim finds it handed to this worker, takes it (claimed, the
// dispatcher back in the record) and startedScript records its start.
// Workers with a stable id are not handed jobs (Node.mayHand): they
// claim every event, and their jobs wait for them while they restart.
//
// What the record of a handed job cannot tell, its worker and its
// dispatcher make up for:
//
//   - a Start that fails deletes the job (failedScript, told by the
//     worker that a dispatcher waits) and answers the dispatcher, as for
//     a claimed job;
//   - a Start that returns after PendingJobTTL (its ctx ended; the janitor
//     would have moved a claimed job by then) is stopped and the job
//     queued again with its dispatcher (startTooSlow), which fails it after
//     maxSlowStarts such starts, as before;
//   - after Start the worker answers by itself only while it is certainly
//     alive (certainlyAlive); otherwise startedScript checks, and answers
//     STALE if the job was taken away meanwhile;
//   - an answer whose dispatcher's stream is gone (the pool declared that
//     node dead) is recorded by startedScript instead (answerLost), for
//     the node's resync to read; resync also takes a handed record older
//     than its Start could be (handedStarted) as started;
//   - a worker that dies before it answers has the job queued again by
//     the janitor, and the start that takes over answers nobody: a
//     DispatchJob that waited longer than WorkerTTL reads the job's record
//     (checkWaits).
//
// The worker's clock comes with the replies of its claim and started
// calls and of its node's keep-alives (every WorkerTTL/3): Redis's time
// and the worker's last keep-alive. An event is fresh when, by that clock
// carried forward on the local monotonic clock:
//
//   - the reply came within WorkerTTL/2,
//   - the worker's keep-alive is younger than WorkerTTL/2 (the janitor
//     declares it dead only after WorkerTTL: its jobs cannot have moved),
//   - the event is younger than PendingJobTTL/4,
//   - it was added after the worker last came back from being declared
//     dead (revive), and
//   - the worker does not already run that generation of the job (a
//     repeated event: not started again, but its dispatcher, if one
//     waits, is told the job runs; after a failover the node's
//     reconciliation starts a handed job from its record, and its start
//     event may come after).
//
// A stop of a handed job may reach the worker's stream before its Start
// ran: the stop event follows the start in the same stream, and the job
// starts and then stops (the dispatcher learns the Start succeeded, the
// stop's caller that it stopped).

// workerClock is what the worker's last claim, started call or keep-alive
// told of Redis's clock and of the worker's keep-alive.
type workerClock struct {
	mu      sync.Mutex
	at      time.Time // when the reply came (monotonic)
	redisMs int64     // Redis's clock then
	aliveMs int64     // the worker's last keep-alive then; 0: not registered
	after   int64     // events added up to this Redis time must be claimed; -1: set from the next reply
}

// workerClockLua defines worker_clock(out, alive, wid, registered, now):
// out followed by Redis's time and the worker's last keep-alive (0 when
// the worker is not registered).
const workerClockLua = `
local function worker_clock(out, alive, wid, registered, now)
  local seen = 0
  if registered then seen = tonumber(redis.call("HGET", alive, "w:" .. wid) or "0") end
  out[#out + 1] = now
  out[#out + 1] = seen
  return out
end
`

// clockedReplies splits the reply of a claim or started call into the
// jobs' replies and the worker's clock, which it keeps.
func (w *Worker) clockedReplies(res any, err error, jobs int, op string) ([]any, error) {
	if err != nil {
		return nil, err
	}
	out, _ := res.([]any)
	if len(out) != jobs+2 {
		return nil, fmt.Errorf("pool: %s: %d replies for %d jobs", op, len(out), jobs)
	}
	now, _ := out[jobs].(int64)
	seen, _ := out[jobs+1].(int64)
	w.setClock(time.Now(), now, seen)
	return out[:jobs], nil
}

// setClock keeps what a reply that came at at told of Redis's clock
// (nowMs) and of the worker's last keep-alive (aliveMs; 0: the worker is
// not registered).
func (w *Worker) setClock(at time.Time, nowMs, aliveMs int64) {
	c := &w.clock
	c.mu.Lock()
	defer c.mu.Unlock()
	c.at, c.redisMs, c.aliveMs = at, nowMs, aliveMs
	if c.after < 0 {
		c.after = nowMs
	}
}

// forgetClock makes the worker claim every event added before its next
// claim or started call: it was declared dead, and the jobs of those
// events may have moved.
func (w *Worker) forgetClock() {
	c := &w.clock
	c.mu.Lock()
	c.at, c.after = time.Time{}, -1
	c.mu.Unlock()
}

// fresh reports whether the start event id, claimed by its admission,
// may be started without a claim (see above).
func (w *Worker) fresh(id string) bool {
	if w.index >= 0 {
		return false
	}
	added, ok := streamIDMs(id)
	if !ok {
		return false
	}
	cfg := w.node.cfg
	c := &w.clock
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.after < 0 || added <= c.after {
		return false
	}
	now, ok := c.alive(cfg)
	return ok && now-added < (cfg.pendingJobTTL/4).Milliseconds()
}

// alive returns Redis's clock now as c carries it forward, and whether
// the worker is certainly alive by it: the clock is younger than
// WorkerTTL/2 and so is the worker's keep-alive (the janitor declares a
// worker dead only after WorkerTTL). c.mu is held.
func (c *workerClock) alive(cfg nodeConfig) (int64, bool) {
	if c.at.IsZero() || c.aliveMs == 0 {
		return 0, false
	}
	since := time.Since(c.at)
	if since > cfg.workerTTL/2 {
		return 0, false
	}
	now := c.redisMs + since.Milliseconds()
	return now, now-c.aliveMs < (cfg.workerTTL / 2).Milliseconds()
}

// certainlyAlive reports whether the worker is certainly alive by its
// clock (workerClock.alive): whether it may answer the dispatchers of the
// jobs handed to it by itself.
func (w *Worker) certainlyAlive() bool {
	if w.index >= 0 {
		return false
	}
	c := &w.clock
	c.mu.Lock()
	defer c.mu.Unlock()
	_, ok := c.alive(w.node.cfg)
	return ok
}

// preclaimed returns the job a start event claimed by its admission
// carries after its header ("CREATED TRACE\nPAYLOAD"), or false for any
// other start event.
func preclaimed(key string, rest []byte) (*Job, bool) {
	if rest == nil {
		return nil, false
	}
	meta, payload, ok := strings.Cut(string(rest), "\n")
	if !ok {
		return nil, false
	}
	c, tc, _ := strings.Cut(meta, " ")
	created, err := strconv.ParseInt(c, 10, 64)
	if err != nil {
		return nil, false
	}
	return &Job{Key: key, Payload: []byte(payload), CreatedAt: time.UnixMilli(created), Attempt: 1, trace: tc}, true
}
