package pool

import (
	"fmt"

	"github.com/redis/go-redis/v9"
	"github.com/shepherd-go/shepherd/streaming"
)

// A job record (layout.jobs) is the authoritative state of a job, a JSON
// object edited only by the scripts below:
//
//	s  state: stateQueued (a start event waits in the job stream),
//	   stateRouted to worker w (a start event waits in w's stream),
//	   stateClaimed by w (its Start runs), stateRunning on w,
//	   stateStopping on w
//	g  generation: bumped whenever the job is queued or routed again;
//	   every event carries it, and a script acting on a stale generation
//	   does nothing
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
const (
	stateQueued   = "q"
	stateRouted   = "r"
	stateClaimed  = "c"
	stateRunning  = "run"
	stateStopping = "x"
)

// prelude is prepended to every script that edits job records. It defines
// the wire contract once, rendered from the Go constants: the stream field
// and event names, the record states, the reply codes, and helpers that
// read and write records (KEYS[1] must be the jobs hash and KEYS[2] the
// payloads hash) and send events. An event's payload is its header
// "nonce gen replyNode requestID" (noReply for none), and for notify
// events a newline and the notification payload (see header in event.go).
var prelude = fmt.Sprintf(`
local FE, FT, FP = %q, %q, %q
local EV_START, EV_STOP, EV_NOTIFY, EV_REPLY = %q, %q, %q, %q
local S_QUEUED, S_ROUTED, S_CLAIMED, S_RUNNING, S_STOPPING = %q, %q, %q, %q, %q
local NO_REPLY = %q
local REPLY_OK, REPLY_START_FAILED, REPLY_STOPPED = %q, %q, %q
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
local function header(r, node, req)
  return r.n .. " " .. r.g .. " " .. (node or NO_REPLY) .. " " .. (req or NO_REPLY)
end
-- send_start adds the start event of r's current generation to stream; it
-- carries the waiting dispatcher, if any, so that whichever start answers.
local function send_start(stream, key, r)
  redis.call("XADD", stream, "*", FE, EV_START, FT, key, FP, header(r, r.rd, r.rq))
end
-- send_reply answers request req on a node's stream; NOMKSTREAM: a node
-- that is gone does not get its stream back.
local function send_reply(stream, req, payload)
  if req and req ~= NO_REPLY then
    redis.call("XADD", stream, "NOMKSTREAM", "*", FE, EV_REPLY, FT, req, FP, payload)
  end
end
-- requeue queues r again in the job stream, for the routers.
local function requeue(key, r, now, jobstream)
  r.s = S_QUEUED; r.g = r.g + 1; r.w = ""; r.t = now
  putrec(key, r)
  send_start(jobstream, key, r)
end
-- reroute hands r, in a new generation, straight to worker owner.
local function reroute(key, r, now, owner, stream)
  r.s = S_ROUTED; r.g = r.g + 1; r.w = owner; r.t = now
  putrec(key, r)
  send_start(stream, key, r)
end
`,
	streaming.FieldEvent, streaming.FieldTopic, streaming.FieldPayload,
	evStart, evStop, evNotify, evReply,
	stateQueued, stateRouted, stateClaimed, stateRunning, stateStopping,
	noReply,
	string(replyOK), string(replyStartFailed), string(replyStopped))

// admitRouteScript records a new job and routes or queues its start
// event. When the dispatching node's copy of the slot table names a
// worker for the key and that copy is current (the fence routeScript
// applies), the event goes straight to the worker's stream, skipping the
// job stream and a router: two hops and two round trips less per job.
// Otherwise it is queued in the job stream for the routers. A dispatch
// whose caller gave up and withdrew it (its nonce is in the withdrawn
// hash) is refused: its command may reach Redis after the withdrawal
// (Redis was frozen, the network slow), and must then do nothing.
//
//	KEYS[1] jobs, KEYS[2] payloads, KEYS[3] job stream, KEYS[4] shutdown
//	map, KEYS[5] workers map, KEYS[6] slots map revision, KEYS[7] the
//	chosen worker's stream (any stream of the pool when none was chosen),
//	KEYS[8] withdrawn dispatches
//	ARGV[1] key, ARGV[2] nonce, ARGV[3] max queued, ARGV[4] payload,
//	ARGV[5] reply node, ARGV[6] request id, ARGV[7] worker id ("" for
//	none), ARGV[8] the slots revision the node decided on
//
// Returns "ROUTED", "OK" (queued), "EXISTS", "FULL", "SHUTDOWN" or
// "WITHDRAWN". The bound counts only jobs waiting in the job stream: a
// routed job does not wait there.
var admitRouteScript = redis.NewScript(prelude + `
if redis.call("HEXISTS", KEYS[8], ARGV[2]) == 1 then return "WITHDRAWN" end
if redis.call("HEXISTS", KEYS[4], "shutdown") == 1 then return "SHUTDOWN" end
if redis.call("HEXISTS", KEYS[1], ARGV[1]) == 1 then return "EXISTS" end
local now = now_ms()
local r = {s = S_QUEUED, g = 1, n = ARGV[2], w = "", t = now, c = now, a = 0, rd = ARGV[5], rq = ARGV[6]}
if ARGV[7] ~= "" and redis.call("HGET", KEYS[6], "rev") == ARGV[8]
  and redis.call("HEXISTS", KEYS[5], ARGV[7]) == 1 then
  r.s = S_ROUTED; r.w = ARGV[7]
  putrec(ARGV[1], r)
  redis.call("HSET", KEYS[2], ARGV[1], ARGV[4])
  send_start(KEYS[7], ARGV[1], r)
  return "ROUTED"
end
if redis.call("XLEN", KEYS[3]) >= tonumber(ARGV[3]) then return "FULL" end
putrec(ARGV[1], r)
redis.call("HSET", KEYS[2], ARGV[1], ARGV[4])
send_start(KEYS[3], ARGV[1], r)
return "OK"
`)

// routeScript hands a queued job to a worker.
//
//	KEYS[1] jobs, KEYS[2] payloads, KEYS[3] workers map, KEYS[4] slots
//	map revision, KEYS[5] the worker's stream
//	ARGV[1] key, ARGV[2] nonce, ARGV[3] generation, ARGV[4] worker id,
//	ARGV[5] the slots revision the router decided on
//
// Returns "OK"; "STALE" when the event is outdated (the job was stopped,
// re-queued or already routed): drop it; "RETRY" when the router's copy of
// the slots is behind Redis or the worker is gone: decide again.
var routeScript = redis.NewScript(prelude + `
local r = getrec(ARGV[1])
if not r or r.n ~= ARGV[2] or r.g ~= tonumber(ARGV[3]) or r.s ~= S_QUEUED then return "STALE" end
if redis.call("HGET", KEYS[4], "rev") ~= ARGV[5] then return "RETRY" end
if redis.call("HEXISTS", KEYS[3], ARGV[4]) == 0 then return "RETRY" end
r.s = S_ROUTED; r.w = ARGV[4]; r.t = now_ms()
putrec(ARGV[1], r)
send_start(KEYS[5], ARGV[1], r)
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
  if not alive or not r or r.n ~= ARGV[i + 1] or r.g ~= tonumber(ARGV[i + 2]) or r.w ~= wid or r.s ~= S_ROUTED then
    out[#out + 1] = {"STALE"}
  else
    r.s = S_CLAIMED; r.t = now; r.a = r.a + 1
    putrec(key, r)
    out[#out + 1] = {"OK", redis.call("HGET", KEYS[2], key) or "", tostring(r.c), tostring(r.a)}
  end
end
return out
`)

// startedScript records that Start succeeded, for a batch of a worker's
// jobs (or one) in one call, and on "OK" or "STOPPING" (Start did succeed
// either way) answers each waiting DispatchJob, saving the worker a round
// trip.
//
//	KEYS[1] jobs, KEYS[2] payloads, KEYS[3] workers map, KEYS[4..] the
//	dispatching nodes' streams
//	ARGV[1] worker id, then per job: key, nonce, generation, request id
//	(noReply: nobody waits), index of the dispatching node's stream in
//	KEYS (counted from KEYS[4] as 1; 0 for none)
//
// It is idempotent: once recorded, running it again returns "OK", so a
// worker whose connection broke can ask again instead of guessing.
// Returns, per job, "OK"; "STOPPING" when a stop is on its way to this
// worker (keep the job: the stop event follows); "STALE" when the job was
// taken away meanwhile (moved after PendingJobTTL, stopped, or this worker
// declared dead): the worker must stop what it just started.
var startedScript = redis.NewScript(prelude + `
local wid = ARGV[1]
local alive = redis.call("HEXISTS", KEYS[3], wid) == 1
local out = {}
for i = 2, #ARGV, 5 do
  local key, rq, si = ARGV[i], ARGV[i + 3], tonumber(ARGV[i + 4])
  local function answer()
    if si > 0 then send_reply(KEYS[3 + si], rq, REPLY_OK) end
  end
  local r = getrec(key)
  if not r or r.n ~= ARGV[i + 1] or r.g ~= tonumber(ARGV[i + 2]) or r.w ~= wid then
    out[#out + 1] = "STALE"
  elseif r.s == S_STOPPING then
    answer(); out[#out + 1] = "STOPPING"
  elseif r.s == S_RUNNING then
    -- Already recorded: a retry after a reply lost to a connection error.
    out[#out + 1] = "OK"
  elseif r.s ~= S_CLAIMED or not alive then
    out[#out + 1] = "STALE"
  else
    -- A running job needs no timestamp (only routed and claimed jobs
    -- expire): dropping it keeps the record of each running job short.
    r.s = S_RUNNING; r.t = nil; r.rd = nil; r.rq = nil
    putrec(key, r)
    answer(); out[#out + 1] = "OK"
  end
end
return out
`)

// failedScript records that Start failed.
//
//	KEYS[1] jobs, KEYS[2] payloads, KEYS[3] job stream
//	ARGV[1] key, ARGV[2] nonce, ARGV[3] generation, ARGV[4] worker id
//
// While a DispatchJob waits for the job's first successful start, a failed
// start deletes the job (DispatchJob returns the error); later, a failed
// start (after a move) queues the job again. Returns "DELETED",
// "REQUEUED" or "STALE".
var failedScript = redis.NewScript(prelude + `
local r = getrec(ARGV[1])
if not r or r.n ~= ARGV[2] or r.g ~= tonumber(ARGV[3]) or r.w ~= ARGV[4] then return "STALE" end
if r.s == S_STOPPING or r.rd then delrec(ARGV[1]); return "DELETED" end
if r.s ~= S_CLAIMED then return "STALE" end
requeue(ARGV[1], r, now_ms(), KEYS[3])
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
//	ARGV[3] node stream prefix, then per job: key, generation, new owner
//	("" for none), index of its stream in KEYS (counted from KEYS[6] as 1;
//	0 for none)
//
// Returns, per job, "ROUTED", "REQUEUED", "DELETED" (a stop was on its way:
// the job ends, and the StopJob waiting for it is answered, since the stop
// event will not be handled) or "STALE".
var releaseScript = redis.NewScript(prelude + `
local wid = ARGV[1]
local current = redis.call("HGET", KEYS[5], "rev") == ARGV[2]
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

// stopScript starts stopping a job (StopJob), or withdraws the job of a
// DispatchJob whose caller gave up. A withdrawal names the dispatch's
// nonce and records it in the withdrawn hash, so that the admission, if it
// has not reached Redis yet, is refused when it does.
//
//	KEYS[1] jobs, KEYS[2] payloads, KEYS[3] workers map, KEYS[4] withdrawn
//	dispatches
//	ARGV[1] key, ARGV[2] worker stream prefix, ARGV[3] reply node,
//	ARGV[4] request id, ARGV[5] nonce ("" for any: StopJob), ARGV[6]
//	node stream prefix
//
// Returns "NOTFOUND"; "DELETED" when no worker runs the job (it was queued
// or its worker is gone): done, and a DispatchJob still waiting for the
// job's start is told that it was stopped; or "SENT" when a stop event
// went to the owner, which answers the reply node when Stop has run.
var stopScript = redis.NewScript(prelude + `
if ARGV[5] ~= "" then redis.call("HSET", KEYS[4], ARGV[5], now_ms()) end
local r = getrec(ARGV[1])
if not r or (ARGV[5] ~= "" and r.n ~= ARGV[5]) then return "NOTFOUND" end
if r.s == S_QUEUED or r.w == "" or redis.call("HEXISTS", KEYS[3], r.w) == 0 then
  delrec(ARGV[1])
  if r.rd and r.rd ~= NO_REPLY and ARGV[5] == "" then
    send_reply(ARGV[6] .. r.rd, r.rq, REPLY_STOPPED .. "StopJob ended it before its Start")
  end
  return "DELETED"
end
r.s = S_STOPPING; r.t = now_ms(); r.sr = ARGV[3]; r.sq = ARGV[4]
putrec(ARGV[1], r)
redis.call("XADD", ARGV[2] .. r.w, "*", FE, EV_STOP, FT, ARGV[1], FP, header(r, ARGV[3], ARGV[4]))
return "SENT"
`)

// stoppedScript deletes a job whose Stop ran on its worker (or that was
// stopped before its worker claimed it). A DispatchJob still waiting for
// the job's start is told that it was stopped.
//
//	KEYS[1] jobs, KEYS[2] payloads
//	ARGV[1] key, ARGV[2] generation, ARGV[3] worker id, ARGV[4] node
//	stream prefix
//
// Returns "OK" or "STALE".
var stoppedScript = redis.NewScript(prelude + `
local r = getrec(ARGV[1])
if not r or r.g ~= tonumber(ARGV[2]) or r.w ~= ARGV[3] or r.s ~= S_STOPPING then return "STALE" end
delrec(ARGV[1])
if r.rd and r.rd ~= NO_REPLY then
  send_reply(ARGV[4] .. r.rd, r.rq, REPLY_STOPPED .. "StopJob ended it before its Start")
end
return "OK"
`)

// notifyScript sends a notification to a running job's worker.
//
//	KEYS[1] jobs, KEYS[2] payloads, KEYS[3] workers map
//	ARGV[1] key, ARGV[2] worker stream prefix, ARGV[3] reply node,
//	ARGV[4] request id, ARGV[5] payload
//
// Returns "NOTFOUND", "NOWORKER" (the job is not running right now: being
// started or moved) or {"SENT", worker id}.
var notifyScript = redis.NewScript(prelude + `
local r = getrec(ARGV[1])
if not r or r.s == S_STOPPING then return "NOTFOUND" end
if r.s ~= S_RUNNING or redis.call("HEXISTS", KEYS[3], r.w) == 0 then return "NOWORKER" end
redis.call("XADD", ARGV[2] .. r.w, "*", FE, EV_NOTIFY, FT, ARGV[1], FP, header(r, ARGV[3], ARGV[4]) .. "\n" .. ARGV[5])
return {"SENT", r.w}
`)

// keepAliveScript records keep-alives of a node and its workers, with
// Redis's clock, and recreates the node's stream if Redis lost it (or the
// janitor removed it), so that replies reach the node again.
//
//	KEYS[1] alive, KEYS[2] workers map, KEYS[3] shutdown map, KEYS[4] the
//	node's stream, KEYS[5] the pool's settings
//	ARGV[1] node id, ARGV[2...] worker ids
//
// A worker missing from the workers map was declared dead: it gets no
// keep-alive, and is returned so its node stops its stale jobs. Returns
// {shutdown flag set ("1"/"0"), the node's standing, dead worker ids...}
// where the standing is "ok", "revived" (its keep-alive was gone: the
// pool declared the node dead, and replies to it may have been lost) or
// "lost" (the pool's settings were gone too: Redis lost the pool's state).
var keepAliveScript = redis.NewScript(`
local t = redis.call("TIME")
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local out = {redis.call("HEXISTS", KEYS[3], "shutdown") == 1 and "1" or "0", "ok"}
if redis.call("HSET", KEYS[1], "n:" .. ARGV[1], now) == 1 then
  out[2] = redis.call("EXISTS", KEYS[5]) == 1 and "revived" or "lost"
end
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

// nodesScript sorts the pool's nodes into live and dead by their
// keep-alives and Redis's clock: a node is dead when its keep-alive is
// older than the TTL, or when it has a record but no keep-alive.
//
//	KEYS[1] alive, KEYS[2] node records
//	ARGV[1] worker TTL in ms
//
// Returns {{live node ids...}, {dead node ids...}}.
var nodesScript = redis.NewScript(`
local t = redis.call("TIME")
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local live, dead, seen = {}, {}, {}
local all = redis.call("HGETALL", KEYS[1])
for i = 1, #all, 2 do
  if string.sub(all[i], 1, 2) == "n:" then
    local id = string.sub(all[i], 3)
    seen[id] = true
    if now - tonumber(all[i + 1]) > tonumber(ARGV[1]) then dead[#dead + 1] = id else live[#live + 1] = id end
  end
end
for _, id in ipairs(redis.call("HKEYS", KEYS[2])) do
  if not seen[id] then dead[#dead + 1] = id end
end
return {live, dead}
`)

// removeNodesScript removes dead nodes: keep-alive, record and stream
// (with the answers still waiting in it), each only if the node is still
// dead (it may have revived since nodesScript saw it).
//
//	KEYS[1] alive, KEYS[2] node records, KEYS[3..] the nodes' streams
//	ARGV[1] worker TTL in ms, ARGV[2..] node ids, in the order of their
//	streams
//
// Returns the number of nodes removed.
var removeNodesScript = redis.NewScript(`
local t = redis.call("TIME")
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local n = 0
for i = 2, #ARGV do
  local id = ARGV[i]
  local seen = redis.call("HGET", KEYS[1], "n:" .. id)
  if not seen or now - tonumber(seen) > tonumber(ARGV[1]) then
    redis.call("HDEL", KEYS[1], "n:" .. id)
    redis.call("HDEL", KEYS[2], id)
    redis.call("DEL", KEYS[1 + i])
    n = n + 1
  end
end
return n
`)

// recoverScanScript finds, in one HSCAN step of the job records, the jobs
// that need recovery: those whose worker is gone, and those stuck between
// routing and a started Start for longer than the pending TTL. It changes
// nothing; recoverScript acts on what it returns, after the caller chose
// each job's new owner.
//
//	KEYS[1] jobs, KEYS[2] payloads, KEYS[3] workers map
//	ARGV[1] pending TTL in ms, ARGV[2] HSCAN cursor ("0" to begin),
//	ARGV[3] records per call
//
// Returns {next cursor, {{key, generation, worker, state, dispatcher
// node or "", stop requester node or ""}...}}.
var recoverScanScript = redis.NewScript(prelude + `
local now = now_ms()
local step = redis.call("HSCAN", KEYS[1], ARGV[2], "COUNT", ARGV[3])
local all = step[2]
local out = {}
for i = 1, #all, 2 do
  local key, r = all[i], cjson.decode(all[i + 1])
  if r.s ~= S_QUEUED then
    local gone = r.w == "" or redis.call("HEXISTS", KEYS[3], r.w) == 0
    local stuck = (r.s == S_ROUTED or r.s == S_CLAIMED) and now - r.t > tonumber(ARGV[1])
    if gone or stuck then
      out[#out + 1] = {key, tostring(r.g), r.w, r.s, r.rd or "", r.sr or ""}
    end
  end
end
return {step[1], out}
`)

// recoverScript recovers the jobs recoverScanScript found, each only if
// its record is still as found (same generation, worker and state) and
// still needs it. A stopping job whose worker is gone is deleted, and its
// StopJob answered (and its DispatchJob, if that still waits). A job
// claimed for longer than the pending TTL by a live worker (its Start
// does not return) whose DispatchJob waits is deleted after
// maxSlowStarts starts, failing the DispatchJob with a *StartError that
// says so. Any other job whose worker is gone, or that is stuck, is
// handed straight to its new owner when the janitor's copy of the slot
// table is current (the fence routeScript applies) and names a live
// worker, else queued again for the routers. Handing it over directly
// keeps recovered jobs away from the job stream, whose blocked reads a
// paused node may still hold (until it is declared dead too).
//
//	KEYS[1] jobs, KEYS[2] payloads, KEYS[3] job stream, KEYS[4] workers
//	map, KEYS[5] slots map revision, KEYS[6..] the new owners' and the
//	answered nodes' streams
//	ARGV[1] pending TTL in ms, ARGV[2] the slots revision the owners were
//	chosen under, ARGV[3] starts after which a slow start fails its
//	dispatch, ARGV[4] the failure message, then per job: key, generation,
//	worker, state, new owner ("" for none), then the indexes in KEYS
//	(counted from KEYS[6] as 1; 0 for none) of the new owner's stream,
//	of the waiting dispatcher's and of the stop requester's
//
// Returns, per job, "ROUTED", "REQUEUED", "DELETED", "FAILED" or "STALE".
var recoverScript = redis.NewScript(prelude + `
local now = now_ms()
local ttl = tonumber(ARGV[1])
local current = redis.call("HGET", KEYS[5], "rev") == ARGV[2]
local out = {}
for i = 5, #ARGV, 8 do
  local key, owner = ARGV[i], ARGV[i + 4]
  local oi, di, si = tonumber(ARGV[i + 5]), tonumber(ARGV[i + 6]), tonumber(ARGV[i + 7])
  local r = getrec(key)
  local res = "STALE"
  if r and r.g == tonumber(ARGV[i + 1]) and r.w == ARGV[i + 2] and r.s == ARGV[i + 3] then
    local gone = r.w == "" or redis.call("HEXISTS", KEYS[4], r.w) == 0
    local stuck = (r.s == S_ROUTED or r.s == S_CLAIMED) and now - r.t > ttl
    if r.s == S_STOPPING then
      if gone then
        delrec(key)
        if si > 0 then send_reply(KEYS[5 + si], r.sq, REPLY_OK) end
        if di > 0 then send_reply(KEYS[5 + di], r.rq, REPLY_STOPPED .. "StopJob ended it before its Start") end
        res = "DELETED"
      end
    elseif gone or stuck then
      if not gone and r.s == S_CLAIMED and r.rd and r.a >= tonumber(ARGV[3]) then
        delrec(key)
        if di > 0 then send_reply(KEYS[5 + di], r.rq, REPLY_START_FAILED .. r.w .. "\n" .. ARGV[4]) end
        res = "FAILED"
      elseif owner ~= "" and oi > 0 and current and (owner ~= r.w or not gone)
        and redis.call("HEXISTS", KEYS[4], owner) == 1 then
        reroute(key, r, now, owner, KEYS[5 + oi])
        res = "ROUTED"
      else
        requeue(key, r, now, KEYS[3])
        res = "REQUEUED"
      end
    end
  end
  out[#out + 1] = res
end
return out
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

// pruneWithdrawnScript forgets withdrawn dispatches older than the
// given age: their admissions can no longer arrive.
//
//	KEYS[1] withdrawn dispatches
//	ARGV[1] age in ms
//
// Returns the number forgotten.
var pruneWithdrawnScript = redis.NewScript(`
local t = redis.call("TIME")
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local n = 0
local all = redis.call("HGETALL", KEYS[1])
for i = 1, #all, 2 do
  if now - tonumber(all[i + 1]) > tonumber(ARGV[1]) then
    redis.call("HDEL", KEYS[1], all[i]); n = n + 1
  end
end
return n
`)
