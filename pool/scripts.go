package pool

import "github.com/redis/go-redis/v9"

// A job record (layout.jobs) is the authoritative state of a job, a JSON
// object edited only by the scripts below:
//
//	s  state: "q" queued (a start event waits in the job stream),
//	   "r" routed to worker w (a start event waits in w's stream),
//	   "c" claimed by w (its Start runs), "run" running on w,
//	   "x" being stopped on w
//	g  generation: bumped whenever the job is queued again; every event
//	   carries it, and a script acting on a stale generation does nothing
//	n  nonce of the DispatchJob that created the record
//	w  worker id, or ""
//	t  when s last changed, absent while running; c when the job was
//	   created (ms, Redis TIME)
//	a  starts so far
//	rd, rq  the node and request of the DispatchJob still waiting for a
//	   start's outcome: carried by every start event until one answers,
//	   so that a start retried after a crash still answers the dispatcher
//	sr, sq  the node and request to answer once a stop completes
//
// Recovery derives everything from these records, never from a side index.
//
// Events added by scripts use the streaming package's field names, passed
// in ARGV as fe, ft, fp. An event's payload is its header
// "nonce gen replyNode requestID" ("-" for no reply), and for notify
// events a newline and the notification payload.
const prelude = `
local function now_ms()
  local t = redis.call("TIME")
  return tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
end
local function getrec(key)
  local raw = redis.call("HGET", KEYS[1], key)
  if not raw then return nil end
  return cjson.decode(raw)
end
local function putrec(key, r)
  redis.call("HSET", KEYS[1], key, cjson.encode(r))
end
local function delrec(key)
  redis.call("HDEL", KEYS[1], key)
  redis.call("HDEL", KEYS[2], key)
end
local function requeue(key, r, now, stream, fe, ft, fp)
  r.s = "q"; r.g = r.g + 1; r.w = ""; r.t = now
  putrec(key, r)
  redis.call("XADD", stream, "*", fe, "start", ft, key, fp,
    r.n .. " " .. r.g .. " " .. (r.rd or "-") .. " " .. (r.rq or "-"))
end
`

// admitRouteScript records a new job and routes or queues its start
// event. When the dispatching node's copy of the slot table names a
// worker for the key and that copy is current (the fence routeScript
// applies), the event goes straight to the worker's stream, skipping the
// job stream and a router: two hops and two round trips less per job.
// Otherwise it is queued in the job stream for the routers.
//
//	KEYS[1] jobs, KEYS[2] payloads, KEYS[3] job stream, KEYS[4] shutdown
//	map, KEYS[5] workers map, KEYS[6] slots map revision, KEYS[7] the
//	chosen worker's stream (any stream of the pool when none was chosen)
//	ARGV[1] key, ARGV[2] nonce, ARGV[3] max queued, ARGV[4] payload,
//	ARGV[5] reply node, ARGV[6] request id, ARGV[7..9] fe, ft, fp,
//	ARGV[10] worker id ("" for none), ARGV[11] the slots revision the
//	node decided on
//
// Returns "ROUTED", "OK" (queued), "EXISTS", "FULL" or "SHUTDOWN". The
// bound counts only jobs waiting in the job stream: a routed job does
// not wait there.
var admitRouteScript = redis.NewScript(prelude + `
if redis.call("HEXISTS", KEYS[4], "shutdown") == 1 then return "SHUTDOWN" end
if redis.call("HEXISTS", KEYS[1], ARGV[1]) == 1 then return "EXISTS" end
local now = now_ms()
local hdr = ARGV[2] .. " 1 " .. ARGV[5] .. " " .. ARGV[6]
if ARGV[10] ~= "" and redis.call("HGET", KEYS[6], "rev") == ARGV[11]
  and redis.call("HEXISTS", KEYS[5], ARGV[10]) == 1 then
  putrec(ARGV[1], {s = "r", g = 1, n = ARGV[2], w = ARGV[10], t = now, c = now, a = 0, rd = ARGV[5], rq = ARGV[6]})
  redis.call("HSET", KEYS[2], ARGV[1], ARGV[4])
  redis.call("XADD", KEYS[7], "*", ARGV[7], "start", ARGV[8], ARGV[1], ARGV[9], hdr)
  return "ROUTED"
end
if redis.call("XLEN", KEYS[3]) >= tonumber(ARGV[3]) then return "FULL" end
putrec(ARGV[1], {s = "q", g = 1, n = ARGV[2], w = "", t = now, c = now, a = 0, rd = ARGV[5], rq = ARGV[6]})
redis.call("HSET", KEYS[2], ARGV[1], ARGV[4])
redis.call("XADD", KEYS[3], "*", ARGV[7], "start", ARGV[8], ARGV[1], ARGV[9], hdr)
return "OK"
`)

// routeScript hands a queued job to a worker.
//
//	KEYS[1] jobs, KEYS[2] payloads, KEYS[3] workers map, KEYS[4] slots
//	map revision, KEYS[5] the worker's stream
//	ARGV[1] key, ARGV[2] nonce, ARGV[3] generation, ARGV[4] worker id,
//	ARGV[5] the slots revision the router decided on, ARGV[6] event
//	header, ARGV[7..9] fe, ft, fp
//
// Returns "OK"; "STALE" when the event is outdated (the job was stopped,
// re-queued or already routed): drop it; "RETRY" when the router's copy of
// the slots is behind Redis or the worker is gone: decide again.
var routeScript = redis.NewScript(prelude + `
local r = getrec(ARGV[1])
if not r or r.n ~= ARGV[2] or r.g ~= tonumber(ARGV[3]) or r.s ~= "q" then return "STALE" end
if redis.call("HGET", KEYS[4], "rev") ~= ARGV[5] then return "RETRY" end
if redis.call("HEXISTS", KEYS[3], ARGV[4]) == 0 then return "RETRY" end
r.s = "r"; r.w = ARGV[4]; r.t = now_ms()
putrec(ARGV[1], r)
redis.call("XADD", KEYS[5], "*", ARGV[7], "start", ARGV[8], ARGV[1], ARGV[9], ARGV[6])
return "OK"
`)

// claimScript lets a worker take jobs routed to it, before their Start: a
// batch of the start events waiting for it (or one) in one call.
//
//	KEYS[1] jobs, KEYS[2] payloads, KEYS[3] workers map
//	ARGV[1] worker id, then per job: key, nonce, generation
//
// Returns, per job, {"OK", payload, createdMs, attempt} or {"STALE"}: the
// event is outdated, the job was stopped or moved, or this worker was
// declared dead; a repeated start of an owned job is STALE too, so it is a
// no-op.
var claimScript = redis.NewScript(prelude + `
local wid = ARGV[1]
local alive = redis.call("HEXISTS", KEYS[3], wid) == 1
local now = now_ms()
local out = {}
for i = 2, #ARGV, 3 do
  local key = ARGV[i]
  local r = getrec(key)
  if not alive or not r or r.n ~= ARGV[i + 1] or r.g ~= tonumber(ARGV[i + 2]) or r.w ~= wid or r.s ~= "r" then
    out[#out + 1] = {"STALE"}
  else
    r.s = "c"; r.t = now; r.a = r.a + 1
    putrec(key, r)
    out[#out + 1] = {"OK", redis.call("HGET", KEYS[2], key) or "", tostring(r.c), tostring(r.a)}
  end
end
return out
`)

// startedScript records that Start succeeded, for a batch of a worker's
// jobs (or one) in one call, and on "OK" or "STOPPING" (Start did succeed
// either way) answers each waiting DispatchJob, saving the worker a round
// trip (XADD NOMKSTREAM: a node that is gone does not get its stream back).
//
//	KEYS[1] jobs, KEYS[2] payloads, KEYS[3] workers map, KEYS[4..] the
//	dispatching nodes' streams
//	ARGV[1] worker id, ARGV[2..4] fe, ft, fp, then per job: key, nonce,
//	generation, request id ("-": nobody waits), index of the dispatching
//	node's stream in KEYS (counted from KEYS[4] as 1; 0 for none)
//
// It is idempotent: once recorded, running it again returns "OK", so a
// worker whose connection broke can ask again instead of guessing.
// Returns, per job, "OK"; "STOPPING" when a stop is on its way to this
// worker (keep the job: the stop event follows); "STALE" when the job was
// taken away meanwhile (moved after PendingJobTTL, stopped, or this worker
// declared dead): the worker must stop what it just started.
var startedScript = redis.NewScript(prelude + `
local wid, fe, ft, fp = ARGV[1], ARGV[2], ARGV[3], ARGV[4]
local alive = redis.call("HEXISTS", KEYS[3], wid) == 1
local out = {}
for i = 5, #ARGV, 5 do
  local key, rq, si = ARGV[i], ARGV[i + 3], tonumber(ARGV[i + 4])
  local function answer()
    if rq ~= "-" and si > 0 then
      redis.call("XADD", KEYS[3 + si], "NOMKSTREAM", "*", fe, "reply", ft, rq, fp, "o")
    end
  end
  local r = getrec(key)
  if not r or r.n ~= ARGV[i + 1] or r.g ~= tonumber(ARGV[i + 2]) or r.w ~= wid then
    out[#out + 1] = "STALE"
  elseif r.s == "x" then
    answer(); out[#out + 1] = "STOPPING"
  elseif r.s == "run" then
    -- Already recorded: a retry after a reply lost to a connection error.
    out[#out + 1] = "OK"
  elseif r.s ~= "c" or not alive then
    out[#out + 1] = "STALE"
  else
    -- A running job needs no timestamp (only "r" and "c" expire):
    -- dropping it keeps the record of each running job short.
    r.s = "run"; r.t = nil; r.rd = nil; r.rq = nil
    putrec(key, r)
    answer(); out[#out + 1] = "OK"
  end
end
return out
`)

// failedScript records that Start failed.
//
//	KEYS[1] jobs, KEYS[2] payloads, KEYS[3] job stream
//	ARGV[1] key, ARGV[2] nonce, ARGV[3] generation, ARGV[4] worker id,
//	ARGV[5..7] fe, ft, fp
//
// While a DispatchJob waits for the job's first successful start, a failed
// start deletes the job (DispatchJob returns the error); later, a failed
// start (after a move) queues the job again. Returns "DELETED",
// "REQUEUED" or "STALE".
var failedScript = redis.NewScript(prelude + `
local r = getrec(ARGV[1])
if not r or r.n ~= ARGV[2] or r.g ~= tonumber(ARGV[3]) or r.w ~= ARGV[4] then return "STALE" end
if r.s == "x" or r.rd then delrec(ARGV[1]); return "DELETED" end
if r.s ~= "c" then return "STALE" end
requeue(ARGV[1], r, now_ms(), KEYS[3], ARGV[5], ARGV[6], ARGV[7])
return "REQUEUED"
`)

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
//	ARGV[3..5] fe, ft, fp, ARGV[6] node stream prefix, then per job: key,
//	generation, new owner ("" for none), index of its stream in KEYS
//	(counted from KEYS[6] as 1; 0 for none)
//
// Returns, per job, "ROUTED", "REQUEUED", "DELETED" (a stop was on its way:
// the job ends, and the StopJob waiting for it is answered, since the stop
// event will not be handled) or "STALE".
var releaseScript = redis.NewScript(prelude + `
local wid, fe, ft, fp = ARGV[1], ARGV[3], ARGV[4], ARGV[5]
local current = redis.call("HGET", KEYS[5], "rev") == ARGV[2]
local live = {}
local now = now_ms()
local out = {}
for i = 7, #ARGV, 4 do
  local key, owner, si = ARGV[i], ARGV[i + 2], tonumber(ARGV[i + 3])
  local r = getrec(key)
  if not r or r.g ~= tonumber(ARGV[i + 1]) or r.w ~= wid then
    out[#out + 1] = "STALE"
  elseif r.s == "x" then
    delrec(key)
    if r.sr and r.sr ~= "-" then
      redis.call("XADD", ARGV[6] .. r.sr, "NOMKSTREAM", "*", fe, "reply", ft, r.sq, fp, "o")
    end
    out[#out + 1] = "DELETED"
  else
    if owner ~= "" and live[owner] == nil then
      live[owner] = current and owner ~= wid and redis.call("HEXISTS", KEYS[4], owner) == 1
    end
    if owner ~= "" and si > 0 and live[owner] then
      r.s = "r"; r.g = r.g + 1; r.w = owner; r.t = now
      putrec(key, r)
      redis.call("XADD", KEYS[5 + si], "*", fe, "start", ft, key, fp,
        r.n .. " " .. r.g .. " " .. (r.rd or "-") .. " " .. (r.rq or "-"))
      out[#out + 1] = "ROUTED"
    else
      requeue(key, r, now, KEYS[3], fe, ft, fp)
      out[#out + 1] = "REQUEUED"
    end
  end
end
return out
`)

// stopScript starts stopping a job (StopJob, or a cancelled DispatchJob).
//
//	KEYS[1] jobs, KEYS[2] payloads, KEYS[3] workers map
//	ARGV[1] key, ARGV[2] worker stream prefix, ARGV[3] reply node,
//	ARGV[4] request id, ARGV[5] nonce ("" for any), ARGV[6..8] fe, ft, fp
//
// Returns "NOTFOUND"; "DELETED" when no worker runs the job (it was queued
// or its worker is gone): done; or "SENT" when a stop event went to the
// owner, which answers the reply node when Stop has run.
var stopScript = redis.NewScript(prelude + `
local r = getrec(ARGV[1])
if not r or (ARGV[5] ~= "" and r.n ~= ARGV[5]) then return "NOTFOUND" end
if r.s == "q" or r.w == "" or redis.call("HEXISTS", KEYS[3], r.w) == 0 then
  delrec(ARGV[1]); return "DELETED"
end
r.s = "x"; r.t = now_ms(); r.sr = ARGV[3]; r.sq = ARGV[4]
putrec(ARGV[1], r)
redis.call("XADD", ARGV[2] .. r.w, "*", ARGV[6], "stop", ARGV[7], ARGV[1], ARGV[8],
  r.n .. " " .. r.g .. " " .. ARGV[3] .. " " .. ARGV[4])
return "SENT"
`)

// stoppedScript deletes a job whose Stop ran on its worker.
//
//	KEYS[1] jobs, KEYS[2] payloads
//	ARGV[1] key, ARGV[2] generation, ARGV[3] worker id
//
// Returns "OK" or "STALE".
var stoppedScript = redis.NewScript(prelude + `
local r = getrec(ARGV[1])
if not r or r.g ~= tonumber(ARGV[2]) or r.w ~= ARGV[3] or r.s ~= "x" then return "STALE" end
delrec(ARGV[1])
return "OK"
`)

// notifyScript sends a notification to a running job's worker.
//
//	KEYS[1] jobs, KEYS[2] payloads, KEYS[3] workers map
//	ARGV[1] key, ARGV[2] worker stream prefix, ARGV[3] reply node,
//	ARGV[4] request id, ARGV[5] payload, ARGV[6..8] fe, ft, fp
//
// Returns "NOTFOUND", "NOWORKER" (the job is not running right now: being
// started or moved) or {"SENT", worker id}.
var notifyScript = redis.NewScript(prelude + `
local r = getrec(ARGV[1])
if not r or r.s == "x" then return "NOTFOUND" end
if r.s ~= "run" or redis.call("HEXISTS", KEYS[3], r.w) == 0 then return "NOWORKER" end
redis.call("XADD", ARGV[2] .. r.w, "*", ARGV[6], "notify", ARGV[7], ARGV[1], ARGV[8],
  r.n .. " " .. r.g .. " " .. ARGV[3] .. " " .. ARGV[4] .. "\n" .. ARGV[5])
return {"SENT", r.w}
`)

// keepAliveScript records keep-alives of a node and its workers, with
// Redis's clock, and recreates the node's stream if Redis lost it (a
// restart without persistence), so that replies reach the node again.
//
//	KEYS[1] alive, KEYS[2] workers map, KEYS[3] shutdown map, KEYS[4] the
//	node's stream
//	ARGV[1] node id, ARGV[2...] worker ids
//
// A worker missing from the workers map was declared dead: it gets no
// keep-alive, and is returned so its node stops its stale jobs. Returns
// {shutdown flag set ("1"/"0"), dead worker ids...}.
var keepAliveScript = redis.NewScript(`
local t = redis.call("TIME")
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local out = {redis.call("HEXISTS", KEYS[3], "shutdown") == 1 and "1" or "0"}
redis.call("HSET", KEYS[1], "n:" .. ARGV[1], now)
if redis.call("EXISTS", KEYS[4]) == 0 then
  local id = redis.call("XADD", KEYS[4], "*", "init", "1")
  redis.call("XDEL", KEYS[4], id)
end
for i = 2, #ARGV do
  if redis.call("HEXISTS", KEYS[2], ARGV[i]) == 1 then
    redis.call("HSET", KEYS[1], "w:" .. ARGV[i], now)
  else
    out[#out + 1] = ARGV[i]
  end
end
return out
`)

// reapScript lists the workers whose keep-alive is older than the TTL,
// by Redis's clock.
//
//	KEYS[1] alive, KEYS[2] workers map
//	ARGV[1] worker TTL in ms
//
// Returns the ids of dead workers.
var reapScript = redis.NewScript(`
local t = redis.call("TIME")
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local dead = {}
local ids = redis.call("HKEYS", KEYS[2])
for _, id in ipairs(ids) do
  local seen = redis.call("HGET", KEYS[1], "w:" .. id)
  if not seen or now - tonumber(seen) > tonumber(ARGV[1]) then dead[#dead + 1] = id end
end
return dead
`)

// recoverScript queues again every job whose worker is gone, and every job
// stuck between routing and a started Start for longer than the pending
// TTL; it deletes stopping jobs whose worker is gone and answers their
// StopJob.
//
//	KEYS[1] jobs, KEYS[2] payloads, KEYS[3] workers map, KEYS[4] job stream
//	ARGV[1] pending TTL in ms, ARGV[2] node stream prefix, ARGV[3..5] fe, ft, fp,
//	ARGV[6] HSCAN cursor ("0" to begin), ARGV[7] records per call
//
// It covers one HSCAN step of the job records, so that a large pool never
// blocks Redis for long; the caller repeats it until the cursor is "0".
// Returns {next cursor, number of jobs queued again}.
var recoverScript = redis.NewScript(prelude + `
local now = now_ms()
local n = 0
local step = redis.call("HSCAN", KEYS[1], ARGV[6], "COUNT", ARGV[7])
local all = step[2]
for i = 1, #all, 2 do
  local key, r = all[i], cjson.decode(all[i + 1])
  if r.s ~= "q" then
    local gone = r.w == "" or redis.call("HEXISTS", KEYS[3], r.w) == 0
    if r.s == "x" then
      if gone then
        delrec(key)
        if r.sr and r.sr ~= "-" then
          redis.call("XADD", ARGV[2] .. r.sr, "*", ARGV[3], "reply", ARGV[4], r.sq, ARGV[5], "o")
        end
      end
    elseif gone or ((r.s == "r" or r.s == "c") and now - r.t > tonumber(ARGV[1])) then
      requeue(key, r, now, KEYS[4], ARGV[3], ARGV[4], ARGV[5])
      n = n + 1
    end
  end
end
return {step[1], n}
`)

// cleanupScript deletes a removed worker's keep-alive and stream.
//
//	KEYS[1] alive, KEYS[2] the worker's stream
//	ARGV[1] worker id
var cleanupScript = redis.NewScript(`
redis.call("HDEL", KEYS[1], "w:" .. ARGV[1])
redis.call("DEL", KEYS[2])
return 1
`)
