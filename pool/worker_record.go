package pool

import (
	"context"
	"fmt"
	"log/slog"
	"time"
)

// claimJobs runs claimScript for starts (pre tells which of them came
// claimed by their admission) and returns one reply per job.
func (w *Worker) claimJobs(ctx context.Context, starts []startRef, pre []bool) ([]any, error) {
	n := w.node
	args := make([]any, 0, 2+6*len(starts))
	args = append(args, w.id, w.fence())
	for i, s := range starts {
		flag := 0
		if pre[i] {
			flag = 1
		}
		args = append(ref(args, s.key, s.h.nonce, s.h.gen), flag, s.h.replyTo, s.h.reqID)
	}
	res, err := n.run(ctx, claimScript, "claim", []string{n.lay.jobs, n.lay.payloads, n.lay.workers, n.lay.alive}, args...)
	return w.clockedReplies(res, err, len(starts), "claim")
}

// recordStarted runs startedScript for a job whose Start succeeded. An
// error leaves it unknown whether the script ran (Redis may have applied
// it and died before answering), so it asks again until Redis answers or
// ctx ends: the script is idempotent. Stopping the job on the first error
// instead would leave a record saying "running here" with nothing
// running, which no recovery notices.
func (w *Worker) recordStarted(ctx context.Context, key string, h header) (any, error) {
	n := w.node
	wait := 10 * time.Millisecond
	for {
		outcomes, err := w.recordJobs(ctx, []startRef{{key: key, h: h}})
		if err == nil {
			return outcomes[0], nil
		}
		if ctx.Err() != nil || n.ctx.Err() != nil {
			return nil, err
		}
		t := time.NewTimer(wait) // retry backoff while Redis is unreachable
		select {
		case <-t.C:
		case <-ctx.Done():
			t.Stop()
			return nil, err
		}
		wait = min(2*wait, time.Second)
	}
}

// waits returns failedScript's flag for a start event that names a
// dispatcher waiting for it: "1", else "0".
func waits(h header) string {
	if h.replyTo != noReply && h.reqID != noReply {
		return "1"
	}
	return "0"
}

// startFailed records that Start failed: the job is deleted and its
// dispatcher told, or it is queued again (after a move).
func (w *Worker) startFailed(key string, h header, startErr error) {
	w.recordFailed(key, h, startErr, false)
}

// startTooSlow handles a handed job whose Start succeeded only after
// PendingJobTTL: too late (a claimed job would have been taken away by
// then), so it is stopped here and queued again, its dispatcher still
// waiting, which fails after maxSlowStarts such starts.
func (w *Worker) startTooSlow(key string, h header, took time.Duration) {
	n := w.node
	w.logger.Warn("Start took longer than PendingJobTTL; stopping the job and queueing it again",
		slog.String("key", key), slog.Duration("took", took), slog.Duration("pending_job_ttl", n.cfg.pendingJobTTL))
	sctx, scancel := context.WithTimeout(context.WithoutCancel(n.ctx), n.cfg.stopTimeout())
	_ = w.stopRun(sctx, key, h.gen)
	scancel()
	w.recordFailed(key, h, fmt.Errorf("the Start handler returned after PendingJobTTL (%v)", n.cfg.pendingJobTTL), true)
}

// recordFailed runs failedScript for a Start that failed, or (slow) that
// succeeded after PendingJobTTL, and answers a dispatcher whose job it
// deleted.
func (w *Worker) recordFailed(key string, h header, startErr error, slow bool) {
	n := w.node
	ctx, cancel := context.WithTimeout(n.ctx, n.cfg.startTimeout())
	defer cancel()
	slowFlag := "0"
	if slow {
		slowFlag = "1"
	}
	res, err := n.run(ctx, failedScript, "start failed",
		[]string{n.lay.jobs, n.lay.payloads, n.lay.jobStream, n.lay.counters},
		append(ref(nil, key, h.nonce, h.gen), w.id, truncateUTF8(startErr.Error(), maxLastErrorSize), waits(h),
			slowFlag, h.replyTo, h.reqID)...)
	if err != nil {
		w.logger.Warn("recording a failed start", slog.String("key", key), slog.Any("error", err))
	}
	w.logger.Info("start failed", slog.String("key", key), slog.Any("outcome", res), slog.Any("error", startErr))
	if res == "REQUEUED" {
		n.metrics.add(ctx, n.metrics.requeued, 1)
	}
	if res == "DELETED" {
		n.reply(ctx, h.replyTo, h.reqID, []byte(string(replyStartFailed)+w.id+"\n"+startErr.Error()))
	}
}

// startRecorded acts on startedScript's outcome for a job whose Start
// succeeded after took.
//
// A handed job (worker_claim.go) whose start could not be recorded (err)
// is kept: its record says it runs here already, and its dispatcher,
// unanswered, withdraws it when it gives up.
func (w *Worker) startRecorded(key string, h header, attempt int, took time.Duration, res any, err error, handed bool) {
	n := w.node
	if err != nil && handed {
		w.logger.Warn("could not answer the dispatcher of a job handed to this worker; it runs, as its record says",
			slog.String("key", key), slog.Any("error", err))
		err = nil
	}
	if err != nil || res == "STALE" {
		// The job was taken away while Start ran (or we cannot tell):
		// stop it here, so that it runs on one worker only. The start
		// that took over answers a waiting DispatchJob.
		if took > n.cfg.pendingJobTTL {
			w.logger.Warn("Start took longer than PendingJobTTL: the pool gave the job up meanwhile (started again, or failed its DispatchJob after maxSlowStarts attempts); stopping it here",
				slog.String("key", key), slog.Duration("took", took), slog.Duration("pending_job_ttl", n.cfg.pendingJobTTL), slog.Int("attempt", attempt))
		} else {
			w.logger.Warn("job taken away during Start; stopping it", slog.String("key", key), slog.Any("error", err))
		}
		sctx, scancel := context.WithTimeout(context.WithoutCancel(n.ctx), n.cfg.stopTimeout())
		defer scancel()
		_ = w.stopRun(sctx, key, h.gen)
		return
	}
	w.jobs[key] = h // startedScript answered the dispatcher
	n.metrics.add(n.ctx, n.metrics.started, 1)
	w.logger.Debug("job started", slog.String("key", key), slog.Int("attempt", attempt))
}

// claimScript lets a worker take jobs routed to it, before their Start: a
// batch of the start events waiting for it (or one) in one call.
//
//	KEYS[1] jobs, KEYS[2] payloads, KEYS[3] workers map, KEYS[4] the
//	keep-alives
//	ARGV[1] worker id, ARGV[2] the node its entry must name ("" for any:
//	Worker.fence), then per job: job ref, 1 when the event came claimed
//	by its admission (0 when not), the waiting dispatcher's node and
//	request the event names (noReply for none)
//
// Returns, per job, {"OK", payload, createdMs, attempt, span context} or
// {"STALE"}: the
// event is outdated, the job was stopped or moved, or this worker was
// declared dead; a repeated start of an owned job is STALE too, so it is a
// no-op. A job its admission claimed for or handed to this worker is
// claimed again (its clock restarted, its starts not counted twice).
// Then, after the
// jobs' replies, the worker's clock (worker_claim.go).
var claimScript = newScript(prelude + workerLua + workerClockLua + `
local wid = ARGV[1]
local alive = worker_of(KEYS[3], wid, ARGV[2])
local now = now_ms()
local out = {}
for i = 3, #ARGV, 6 do
  local key, r = job(i)
  local pre = ARGV[i + 3] == "1"
  if not alive or not r or r.w ~= wid
    or (r.s ~= S_ROUTED and not (pre and (r.s == S_CLAIMED or (r.ps and r.s == S_RUNNING)))) then
    out[#out + 1] = {"STALE"}
  else
    if r.s == S_ROUTED then r.a = r.a + 1 end
    if r.ps and r.s == S_RUNNING and ARGV[i + 5] ~= NO_REPLY then
      -- A handed job's record does not name its dispatcher; claimed, it
      -- does, as any claimed job's, so that a start that takes over
      -- (the janitor moves a claimed job that stays claimed) answers it.
      r.rd = ARGV[i + 4]; r.rq = ARGV[i + 5]
    end
    -- A handed job keeps r.ps while claimed: its start was counted at
    -- its admission (startedScript, failedScript).
    r.s = S_CLAIMED; r.t = now; r.st = nil
    putrec(key, r)
    -- Numbers go back as integer replies: tostring would format them
    -- with %.14g, a cost a job.
    out[#out + 1] = {"OK", payload_of(key), r.c, r.a, r.tc or ""}
  end
end
return worker_clock(out, KEYS[4], wid, alive, now)
`)

// startedScript records that Start succeeded, for batches of jobs of one
// or more workers of a node (started_batch.go) in one call, and on "OK"
// or "STOPPING" (Start did succeed either way) answers each waiting
// DispatchJob, saving the worker a round trip: one reply entry per
// dispatching node, whose topic is the request ids of the call's jobs it
// dispatched, joined by commas. It records when (r.st) and counts the
// start in the counters hash.
//
//	KEYS[1] jobs, KEYS[2] payloads, KEYS[3] workers map, KEYS[4] counters,
//	KEYS[5] the keep-alives, KEYS[6..] the dispatching nodes' streams
//	ARGV: per worker, its id, the node its entry must name ("" for any),
//	its number of jobs, then per job: job ref, request id (noReply:
//	nobody waits), index of the dispatching node's stream in KEYS
//	(counted from KEYS[6] as 1; 0 for none)
//
// It is idempotent: once recorded, running it again returns "OK" (and
// counts nothing: r.st is set), so a worker whose connection broke can
// ask again instead of guessing.
// Returns, per worker, per job, "OK"; "STOPPING" when a stop is on its way
// to this worker (keep the job: the stop event follows); "STALE" when the
// job was taken away meanwhile (moved after PendingJobTTL, stopped, or
// this worker declared dead): the worker must stop what it just started.
// Then, after the worker's jobs' outcomes, its clock (worker_claim.go).
var startedScript = newScript(prelude + workerLua + workerClockLua + `
local now = now_ms()
local started = 0
local out = {}
-- The answers to each dispatching node go in one reply entry, their
-- request ids joined by commas (replyLoop splits them).
local oks = {}
local function answer(si, rq)
  if si > 0 and rq ~= NO_REPLY then
    local l = oks[si]
    if l then l[#l + 1] = rq else oks[si] = {rq} end
  end
end
local g = 1
while g <= #ARGV do
  local wid = ARGV[g]
  local alive = worker_of(KEYS[3], wid, ARGV[g + 1])
  local last = g + 2 + 5 * tonumber(ARGV[g + 2])
  for i = g + 3, last, 5 do
    local rq, si = ARGV[i + 3], tonumber(ARGV[i + 4])
    local key, r = job(i)
    if not r or r.w ~= wid then
      out[#out + 1] = "STALE"
    elseif r.s == S_STOPPING then
      -- Start did succeed: the dispatcher learns it, and the stop that
      -- follows does not tell it again. A stop of a job already running
      -- keeps its r.st: this is then a retry, which counts nothing. A
      -- handed job (r.ps) counted its start at its admission.
      answer(si, rq)
      r.rd = nil; r.rq = nil
      if not r.st then
        r.st = now
        if not r.ps then started = started + 1 end
      end
      r.ps = nil
      putrec(key, r)
      out[#out + 1] = "STOPPING"
    elseif r.s == S_RUNNING and not r.ps then
      -- Already recorded: a retry after a reply lost to a connection error.
      out[#out + 1] = "OK"
    elseif (r.s ~= S_CLAIMED and not (r.ps and r.s == S_RUNNING)) or not alive then
      out[#out + 1] = "STALE"
    else
      -- A running job needs no r.t (only routed and claimed jobs expire):
      -- r.st, when Start succeeded, stands for it, which keeps the record
      -- of each running job short. A handed job (r.ps: its worker found
      -- its clock too old to answer by itself) counted its start at its
      -- admission.
      if not r.ps then started = started + 1 end
      r.s = S_RUNNING; r.t = nil; r.st = now; r.rd = nil; r.rq = nil; r.ps = nil
      putrec(key, r)
      answer(si, rq)
      out[#out + 1] = "OK"
    end
  end
  worker_clock(out, KEYS[5], wid, alive, now)
  g = last + 1
end
for si, rqs in pairs(oks) do send_reply(KEYS[5 + si], table.concat(rqs, ","), REPLY_OK) end
count(KEYS[4], C_STARTED, started)
return out
`)

// failedScript records that Start failed, and counts it in the counters
// hash unless the event was stale.
//
//	KEYS[1] jobs, KEYS[2] payloads, KEYS[3] job stream, KEYS[4] counters
//	ARGV[1..3] job ref, ARGV[4] worker id, ARGV[5] Start's error text
//	(at most maxLastErrorSize bytes), ARGV[6] "1" when the start event
//	named a dispatcher waiting for it (a handed job's record does not),
//	ARGV[7] "1" when Start succeeded but only after PendingJobTTL, then
//	ARGV[8], ARGV[9] that dispatcher's node and request
//
// While a DispatchJob waits for the job's first successful start, a failed
// start deletes the job (DispatchJob returns the error); later, a failed
// start (after a move) queues the job again, keeping the error text in
// r.e. Returns "DELETED", "REQUEUED" or "STALE".
var failedScript = newScript(prelude + `
local key, r = job(1)
if not r or r.w ~= ARGV[4] then return "STALE" end
-- A handed job (r.ps) counted its start at its admission: take it back.
if r.ps then redis.call("HINCRBY", KEYS[4], C_STARTED, -1) end
if ARGV[7] == "1" and r.ps and r.s == S_RUNNING then
  -- A handed job whose Start returned only after PendingJobTTL (its
  -- worker stopped it): queued again, with its waiting dispatcher, as a
  -- claimed job the janitor finds stuck would be (recoverScript, which
  -- fails the dispatch after maxSlowStarts starts).
  r.rd = ARGV[8]; r.rq = ARGV[9]
  requeue(key, r, now_ms(), KEYS[3])
  return "REQUEUED"
end
if r.s == S_STOPPING or r.rd or ARGV[6] == "1" then
  delrec(key)
  count(KEYS[4], C_STARTS_FAILED, 1)
  return "DELETED"
end
if r.s ~= S_CLAIMED and not (r.ps and r.s == S_RUNNING) then return "STALE" end
r.ps = nil
r.e = ARGV[5]
requeue(key, r, now_ms(), KEYS[3])
count(KEYS[4], C_STARTS_FAILED, 1)
return "REQUEUED"
`)
