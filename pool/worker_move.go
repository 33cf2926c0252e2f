package pool

import (
	"context"
	"log/slog"
	"strconv"
	"time"

	"github.com/redis/go-redis/v9"
)

// settle runs after each event the worker handled. A full rebalance pass
// costs a jump hash per running job, so it runs only when the table
// differs from the one the last pass used; otherwise only the event's key
// is checked (a start routed under a table older than ours). That keeps
// an event's cost independent of how many jobs the worker runs.
func (w *Worker) settle(key string) {
	if len(w.jobs) == 0 {
		return
	}
	t := w.node.table()
	if w.balanced == nil || !t.sameSlots(*w.balanced) {
		w.rebalance()
		return
	}
	if _, ok := w.jobs[key]; ok {
		if owner := t.owner(key); owner != "" && owner != w.id {
			w.move(key)
		}
	}
}

// rebalance moves the jobs that the current table gives to another live
// worker: Stop here first, then release, so the new owner starts the job
// only after it stopped here.
func (w *Worker) rebalance() {
	if len(w.jobs) == 0 {
		return
	}
	t := w.node.table()
	w.balanced = &t
	for key := range w.jobs {
		if owner := t.owner(key); owner != "" && owner != w.id {
			w.move(key)
		}
	}
}

// move stops a job here and gives it back to the pool.
func (w *Worker) move(key string) {
	n := w.node
	ctx, cancel := context.WithTimeout(context.WithoutCancel(n.ctx), n.cfg.workerShutdownTTL)
	defer cancel()
	h := w.jobs[key]
	_ = w.callStop(ctx, key)
	delete(w.jobs, key)
	n.metrics.add(ctx, n.metrics.moved, 1)
	if err := w.release(ctx, key, h); err != nil {
		// The record still names this worker: the janitor requeues the job
		// once this worker is gone (release retried until it leaves).
		w.logger.Error("release failed", slog.String("key", key), slog.Any("error", err))
	}
}

// release gives a job that this worker just stopped back to the pool. It
// retries while Redis fails, because nothing else would: the record still
// says the job runs here, and the janitor requeues only the jobs of workers
// that are gone. It gives up when ctx ends or the worker or node is
// leaving (leaving removes the worker, after which the janitor requeues
// the job).
func (w *Worker) release(ctx context.Context, key string, h header) error {
	n := w.node
	backoff := 50 * time.Millisecond
	for {
		outcomes, err := w.releaseJobs(ctx, n.table(), []string{key}, []int64{h.gen})
		if err == nil {
			w.countRouted(outcomes)
			return nil
		}
		w.logger.Warn("release failed; retrying", slog.String("key", key), slog.Any("error", err), slog.Duration("retry_in", backoff))
		select {
		case <-ctx.Done():
			return err
		case <-w.stopReq:
			return err
		case <-n.ctx.Done():
			return err
		case <-time.After(backoff):
		}
		backoff = min(2*backoff, time.Second)
	}
}

// handOverAll stops every job of the worker and gives each back to the
// pool, as move does, but in batches: the Stop handlers of a batch run
// first, one by one, then one releaseScript call releases the batch.
// A worker with thousands of jobs thus leaves in a few round trips rather
// than one per job, and each job is still stopped here before it goes to
// another worker. When the batch call fails (an error, Redis restarting),
// its jobs are released one by one; a release that fails then too is left
// to the janitor, which requeues the job once this worker is gone.
func (w *Worker) handOverAll(ctx context.Context) {
	n := w.node
	keys := make([]string, 0, len(w.jobs))
	for key := range w.jobs {
		keys = append(keys, key)
	}
	for len(keys) > 0 {
		batch := keys[:min(releaseBatch, len(keys))]
		keys = keys[len(batch):]
		gens := make([]int64, len(batch))
		for i, key := range batch {
			gens[i] = w.jobs[key].gen
			_ = w.callStop(ctx, key)
			delete(w.jobs, key)
		}
		n.metrics.add(ctx, n.metrics.moved, int64(len(batch)))
		t := n.table()
		outcomes, err := w.releaseJobs(ctx, t, batch, gens)
		if err == nil {
			w.countRouted(outcomes)
			continue
		}
		w.logger.Warn("batch release failed; releasing one by one", slog.Int("jobs", len(batch)), slog.Any("error", err))
		for i, key := range batch {
			outcomes, err := w.releaseJobs(ctx, t, []string{key}, gens[i:i+1])
			if err != nil {
				w.logger.Warn("release failed", slog.String("key", key), slog.Any("error", err))
				continue
			}
			w.countRouted(outcomes)
		}
	}
}

// releaseBatch is how many jobs one releaseScript call releases: it keeps
// a call well under a millisecond of Redis time.
const releaseBatch = 128

// releaseJobs runs releaseScript for keys (of generations gens), each
// handed to its owner under t when there is one, and returns one outcome
// per job.
func (w *Worker) releaseJobs(ctx context.Context, t table, keys []string, gens []int64) ([]any, error) {
	n := w.node
	sk := newScriptKeys(n.lay.jobs, n.lay.payloads, n.lay.jobStream, n.lay.workers, n.lay.slotsRev)
	args := []any{w.id, strconv.FormatInt(t.rev, 10), n.lay.nprefix}
	for i, key := range keys {
		owner, idx := t.owner(key), 0
		if owner == w.id {
			owner = "" // our own table still names us: let a router decide
		}
		if owner != "" {
			idx = sk.add(n.lay.wprefix + owner)
		}
		args = append(args, key, gens[i], owner, idx)
	}
	res, err := n.run(ctx, releaseScript, "release", sk.keys, args...)
	return perJob(res, err, len(keys), "release")
}

// countRouted counts, for tests, the released jobs that went straight to
// their new owner.
func (w *Worker) countRouted(outcomes []any) {
	for _, o := range outcomes {
		if o == "ROUTED" {
			w.node.releasesRouted.Add(1)
		}
	}
}

// releaseScript gives jobs back to the pool so that other workers start
// them (after their Stop ran here: rebalance, RemoveWorker, Close): a
// batch of one worker's jobs (or one) in one call. Like admitRouteScript,
// it hands a job straight to its new owner when the releasing node's copy
// of the slot table is current (the fence routeScript applies, read once
// per call); otherwise it queues the job for the routers.
//
//	KEYS[1] jobs, KEYS[2] payloads, KEYS[3] job stream, KEYS[4] workers
//	map, KEYS[5] slots map revision, KEYS[6..] the new owners' streams
//	ARGV[1] worker id, ARGV[2] the slots revision the node decided on,
//	ARGV[3] node stream prefix, then per job: key, generation, new owner
//	("" for none), index of its stream in KEYS (counted from KEYS[6] as 1;
//	0 for none)
//
// Returns, per job, "ROUTED", "REQUEUED", "DELETED" (a stop was on its way:
// the job ends, and the StopJob waiting for it is answered, since the stop
// event will not be handled) or "STALE".
var releaseScript = redis.NewScript(prelude + `
local wid = ARGV[1]
local current = redis.call("HGET", KEYS[5], REV_FIELD) == ARGV[2]
local live = {}
local now = now_ms()
local out = {}
for i = 4, #ARGV, 4 do
  local key, owner, si = ARGV[i], ARGV[i + 2], tonumber(ARGV[i + 3])
  local r = getrec(key)
  if not r or r.g ~= tonumber(ARGV[i + 1]) or r.w ~= wid then
    out[#out + 1] = "STALE"
  elseif r.s == S_STOPPING then
    delrec(key)
    if r.sr and r.sr ~= NO_REPLY then send_reply(ARGV[3] .. r.sr, r.sq, REPLY_OK) end
    if r.rd and r.rd ~= NO_REPLY then
      send_reply(ARGV[3] .. r.rd, r.rq, REPLY_STOPPED .. "StopJob ended it before its Start")
    end
    out[#out + 1] = "DELETED"
  else
    if owner ~= "" and live[owner] == nil then
      live[owner] = current and owner ~= wid and redis.call("HEXISTS", KEYS[4], owner) == 1
    end
    if owner ~= "" and si > 0 and live[owner] then
      reroute(key, r, now, owner, KEYS[5 + si])
      out[#out + 1] = "ROUTED"
    else
      requeue(key, r, now, KEYS[3])
      out[#out + 1] = "REQUEUED"
    end
  end
end
return out
`)

// revive handles the pool having declared this worker dead: its jobs were
// (or will be) started elsewhere, so it stops them here without touching
// their records, and joins again as a fresh member.
func (w *Worker) revive() {
	n := w.node
	w.logger.Warn("worker was declared dead; stopping its stale jobs and rejoining", slog.Int("jobs", len(w.jobs)))
	ctx, cancel := context.WithTimeout(n.ctx, n.cfg.workerShutdownTTL)
	defer cancel()
	for key := range w.jobs {
		_ = w.callStop(ctx, key)
		delete(w.jobs, key)
	}
	if _, ok := n.shutdown.Get(shutdownFlag); ok {
		return
	}
	if err := w.register(ctx); err != nil && n.ctx.Err() == nil {
		// The next keep-alive reports this worker dead again: retry then.
		w.logger.Error("rejoin failed", slog.Any("error", err))
	}
}
