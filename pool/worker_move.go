package pool

import (
	"context"
	"errors"
	"log/slog"
	"strconv"
	"time"
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
	ctx, cancel := context.WithTimeout(context.WithoutCancel(n.ctx), n.cfg.stopTimeout())
	defer cancel()
	h := w.jobs[key]
	_ = w.stopRun(ctx, key, h.gen)
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
		refs := []startRef{{key: key, h: h}}
		outcomes, err := w.releaseJobs(ctx, n.table(), refs)
		if err == nil {
			w.released(ctx, refs, outcomes)
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
	refs := make([]startRef, 0, len(w.jobs))
	for key, h := range w.jobs {
		refs = append(refs, startRef{key: key, h: h})
	}
	for len(refs) > 0 {
		batch := refs[:min(releaseBatch, len(refs))]
		refs = refs[len(batch):]
		for _, r := range batch {
			_ = w.stopRun(ctx, r.key, r.h.gen)
			delete(w.jobs, r.key)
		}
		n.metrics.add(ctx, n.metrics.moved, int64(len(batch)))
		t := n.table()
		outcomes, err := w.releaseJobs(ctx, t, batch)
		if err == nil {
			w.released(ctx, batch, outcomes)
			continue
		}
		w.logger.Warn("batch release failed; releasing one by one", slog.Int("jobs", len(batch)), slog.Any("error", err))
		for i := range batch {
			one := batch[i : i+1]
			outcomes, err := w.releaseJobs(ctx, t, one)
			if err != nil {
				w.logger.Warn("release failed", slog.String("key", one[0].key), slog.Any("error", err))
				continue
			}
			w.released(ctx, one, outcomes)
		}
	}
}

// releaseBatch is how many jobs one releaseScript call releases: it keeps
// a call well under a millisecond of Redis time.
const releaseBatch = 128

// releaseJobs runs releaseScript for the jobs refs name, each handed to
// its owner under t when there is one, and returns one outcome per job.
func (w *Worker) releaseJobs(ctx context.Context, t table, refs []startRef) ([]any, error) {
	n := w.node
	sk := newScriptKeys(n.lay.jobs, n.lay.payloads, n.lay.jobStream, n.lay.workers, n.lay.slotsRev)
	args := []any{w.id, strconv.FormatInt(t.rev, 10)}
	for _, r := range refs {
		owner, idx := t.owner(r.key), 0
		if owner == w.id {
			owner = "" // our own table still names us: let a router decide
		}
		if owner != "" {
			idx = sk.add(n.lay.wprefix + owner)
		}
		args = append(ref(args, r.key, r.h.nonce, r.h.gen), owner, idx)
	}
	res, err := n.run(ctx, releaseScript, "release", sk.keys, args...)
	return perJob(res, err, len(refs), "release")
}

// released acts on releaseScript's outcomes: a job whose stop was on its
// way ends here, since its stop event will not be handled (endStop); the
// jobs that went straight to their new owner are counted for tests.
func (w *Worker) released(ctx context.Context, refs []startRef, outcomes []any) {
	for i, o := range outcomes {
		switch o {
		case "ROUTED":
			w.node.test.releasesRouted.Add(1)
		case "STOPPING":
			if err := w.endStop(ctx, refs[i].key); err != nil {
				w.logger.Warn("ending a stop", slog.String("key", refs[i].key), slog.Any("error", err))
			}
		}
	}
}

// releaseScript gives jobs back to the pool so that other workers start
// them (after their Stop ran here: rebalance, RemoveWorker, Close): a
// batch of one worker's jobs (or one) in one call. Like admitRouteScript,
// it hands a job straight to its new owner when the releasing node's copy
// of the slot table is current (the fence routeScript applies, read once
// per call); otherwise it queues the job for the routers. A job with a
// stop on its way is left as it is: the worker ends that stop itself
// (endStop), since its stop event will not be handled.
//
//	KEYS[1] jobs, KEYS[2] payloads, KEYS[3] job stream, KEYS[4] workers
//	map, KEYS[5] slots map revision, KEYS[6..] the new owners' streams
//	ARGV[1] worker id, ARGV[2] the slots revision the node decided on,
//	then per job: job ref, new owner ("" for none), index of its stream in
//	KEYS (counted from KEYS[6] as 1; 0 for none)
//
// Returns, per job, "ROUTED", "REQUEUED", "STOPPING" or "STALE".
var releaseScript = newScript(prelude + `
local wid = ARGV[1]
local current = redis.call("HGET", KEYS[5], REV_FIELD) == ARGV[2]
local live = {}
local now = now_ms()
local out = {}
for i = 3, #ARGV, 5 do
  local key, r = job(i)
  local owner, si = ARGV[i + 3], tonumber(ARGV[i + 4])
  if not r or r.w ~= wid then
    out[#out + 1] = "STALE"
  elseif r.s == S_STOPPING then
    out[#out + 1] = "STOPPING"
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
// their records, and joins again as a fresh member. Another worker of
// this node that rejoined first may have been handed one of these keys
// back and stopped the stale run before its Start (see runs): that run's
// Stop is then not called again.
func (w *Worker) revive() {
	n := w.node
	w.forgetClock() // the events already in its stream are claimed first
	w.logger.Warn("worker was declared dead; stopping its stale jobs and rejoining", slog.Int("jobs", len(w.jobs)))
	ctx, cancel := context.WithTimeout(n.ctx, n.cfg.stopTimeout())
	defer cancel()
	for key, h := range w.jobs {
		_ = w.stopRun(ctx, key, h.gen)
		delete(w.jobs, key)
	}
	if _, ok := n.shutdown.Get(shutdownFlag); ok {
		return
	}
	err := w.register(ctx)
	if errors.Is(err, ErrNodeIDInUse) {
		w.retire(err)
		return
	}
	if err != nil && n.ctx.Err() == nil {
		// The next keep-alive reports this worker dead again: retry then.
		w.logger.Error("rejoin failed", slog.Any("error", err))
	}
}

// retire ends a worker whose stable id a restarted process took over
// while this one was cut off (identity.go): it has stopped its jobs; it
// stops reading its stream, which is the other process's now, and its
// loop, and the node forgets it.
func (w *Worker) retire(cause error) {
	n := w.node
	w.logger.Error("this node's id was taken over by another process; the worker leaves its jobs to it and stops", slog.Any("error", cause))
	n.mu.Lock()
	if n.myWorkers[w.id] == w {
		delete(n.myWorkers, w.id)
	}
	n.mu.Unlock()
	_ = n.inbox.Remove(context.WithoutCancel(n.ctx), w.stream)
	n.inboxMu.Lock()
	delete(n.inboxes, w.stream.Name())
	n.inboxMu.Unlock()
	w.slot = -1
	w.stopOnce.Do(func() { close(w.stopReq) })
}
