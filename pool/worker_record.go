package pool

import (
	"context"
	"log/slog"
	"time"
)

// claimJobs runs claimScript for starts (pre tells which of them came
// claimed by their admission) and returns one reply per job.
func (w *Worker) claimJobs(ctx context.Context, starts []startRef, pre []bool) ([]any, error) {
	n := w.node
	args := make([]any, 0, 2+4*len(starts))
	args = append(args, w.id, w.fence())
	for i, s := range starts {
		flag := 0
		if pre[i] {
			flag = 1
		}
		args = append(ref(args, s.key, s.h.nonce, s.h.gen), flag)
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

// startFailed records that Start failed: the job is deleted and its
// dispatcher told, or it is queued again (after a move).
func (w *Worker) startFailed(key string, h header, startErr error) {
	n := w.node
	ctx, cancel := context.WithTimeout(n.ctx, n.cfg.startTimeout())
	defer cancel()
	res, err := n.run(ctx, failedScript, "start failed",
		[]string{n.lay.jobs, n.lay.payloads, n.lay.jobStream, n.lay.counters},
		append(ref(nil, key, h.nonce, h.gen), w.id, truncateUTF8(startErr.Error(), maxLastErrorSize))...)
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
func (w *Worker) startRecorded(key string, h header, attempt int, took time.Duration, res any, err error) {
	n := w.node
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
//	by its admission (0 when not)
//
// Returns, per job, {"OK", payload, createdMs, attempt, span context} or
// {"STALE"}: the
// event is outdated, the job was stopped or moved, or this worker was
// declared dead; a repeated start of an owned job is STALE too, so it is a
// no-op. A job its admission claimed for this worker is claimed again
// (its clock restarted, its starts not counted twice). Then, after the
// jobs' replies, the worker's clock (worker_claim.go).
var claimScript = newScript(prelude + workerLua + workerClockLua + `
local wid = ARGV[1]
local alive = worker_of(KEYS[3], wid, ARGV[2])
local now = now_ms()
local out = {}
for i = 3, #ARGV, 4 do
  local key, r = job(i)
  local pre = ARGV[i + 3] == "1"
  if not alive or not r or r.w ~= wid or (r.s ~= S_ROUTED and not (pre and r.s == S_CLAIMED)) then
    out[#out + 1] = {"STALE"}
  else
    if r.s == S_ROUTED then r.a = r.a + 1 end
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
    local key, rq, si = ARGV[i], ARGV[i + 3], tonumber(ARGV[i + 4])
    -- The fast path: the record as admitRouteScript's compact claim wrote
    -- it, for this worker, nonce and generation (one comparison tells),
    -- with nothing but its dispatcher's fields after the start count. It
    -- becomes what encrec writes for a running job, the payload kept as
    -- bytes: no decoding, no table.
    local raw = redis.call("HGET", KEYS[1], key)
    local c, q, e
    if raw and alive then
      local pre = "c " .. ARGV[i + 2] .. " " .. ARGV[i + 1] .. " " .. wid .. " "
      if string.sub(raw, 1, #pre) == pre then
        c, q, e = string.match(raw, "^(%x+) %d+() t=0 rd=[^ \n]+ rq=[^ \n]+()", #pre + 1)
        if c and e <= #raw and string.byte(raw, e) ~= 10 then c = nil end
        if c then c = tonumber(c, 16); if c > now then c = nil end end
      end
    end
    if c then
      redis.call("HSET", KEYS[1], key, "u" .. string.sub(raw, 2, q - 1) .. string.format(" st=%x", now - c) .. string.sub(raw, e))
      started = started + 1
      answer(si, rq)
      out[#out + 1] = "OK"
    else
      local r
      if raw then
        -- job(i), on the entry read above
        local r0, p = decrec(raw)
        local nonce, gen = ARGV[i + 1], tonumber(ARGV[i + 2])
        if (nonce == "" or r0.n == nonce) and (gen < 0 or r0.g == gen) then r = r0; PAYLOAD[key] = p end
      end
      if not r or r.w ~= wid then
        out[#out + 1] = "STALE"
      elseif r.s == S_STOPPING then
        -- Start did succeed: the dispatcher learns it, and the stop that
        -- follows does not tell it again. A stop of a job already running
        -- keeps its r.st: this is then a retry, which counts nothing.
        answer(si, rq)
        r.rd = nil; r.rq = nil
        if not r.st then r.st = now; started = started + 1 end
        putrec(key, r)
        out[#out + 1] = "STOPPING"
      elseif r.s == S_RUNNING then
        -- Already recorded: a retry after a reply lost to a connection error.
        out[#out + 1] = "OK"
      elseif r.s ~= S_CLAIMED or not alive then
        out[#out + 1] = "STALE"
      else
        -- A running job needs no r.t (only routed and claimed jobs expire):
        -- r.st, when Start succeeded, stands for it, which keeps the record
        -- of each running job short.
        r.s = S_RUNNING; r.t = nil; r.st = now; r.rd = nil; r.rq = nil
        putrec(key, r)
        started = started + 1
        answer(si, rq)
        out[#out + 1] = "OK"
      end
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
//	(at most maxLastErrorSize bytes)
//
// While a DispatchJob waits for the job's first successful start, a failed
// start deletes the job (DispatchJob returns the error); later, a failed
// start (after a move) queues the job again, keeping the error text in
// r.e. Returns "DELETED", "REQUEUED" or "STALE".
var failedScript = newScript(prelude + `
local key, r = job(1)
if not r or r.w ~= ARGV[4] then return "STALE" end
if r.s == S_STOPPING or r.rd then
  delrec(key)
  count(KEYS[4], C_STARTS_FAILED, 1)
  return "DELETED"
end
if r.s ~= S_CLAIMED then return "STALE" end
r.e = ARGV[5]
requeue(key, r, now_ms(), KEYS[3])
count(KEYS[4], C_STARTS_FAILED, 1)
return "REQUEUED"
`)
