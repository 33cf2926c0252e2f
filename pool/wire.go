package pool

import (
	"encoding/json"
	"fmt"
	"strconv"
	"strings"

	"github.com/shepherd-go/shepherd/internal/member"
	"github.com/shepherd-go/shepherd/internal/streamfields"
	"github.com/shepherd-go/shepherd/rmap"
)

// The wire contract between the pool's Go code and its Lua scripts: the
// job record, the record states, the events and their header, the reply
// codes. Each is defined here once; the scripts get them from prelude,
// rendered from these definitions.

// record is a job record: the authoritative state of a job, stored as JSON
// in the jobs hash (layout.jobs) and edited only by the scripts, which use
// the same field names (r.s, r.g, ...; TestScriptsUseOnlyRecordFields
// checks it). Recovery derives everything from the records, never from a
// side index.
type record struct {
	// State is one of the state constants.
	State string `json:"s"`
	// Gen is bumped whenever the job is queued or routed again; every
	// event carries it, and a script acting on a stale generation does
	// nothing.
	Gen int64 `json:"g"`
	// Nonce is the nonce of the DispatchJob that created the record.
	Nonce string `json:"n"`
	// Worker is the worker the job is routed to or runs on, or "".
	Worker string `json:"w"`
	// Changed is when State last changed (ms, Redis TIME); absent while
	// running. Created is when the job was created.
	Changed int64 `json:"t,omitempty"`
	Created int64 `json:"c"`
	// Started is when the current run's Start succeeded (ms, Redis TIME):
	// set by startedScript, dropped when the job is claimed, queued or
	// routed again; while running it stands for Changed too. Records
	// written before it existed lack it.
	Started int64 `json:"st,omitempty"`
	// Starts counts the job's claims so far.
	Starts int `json:"a"`
	// LastErr is the error text of the job's last failed Start (one after
	// a move, which queued the job again), cut to maxLastErrorSize bytes;
	// kept until the job ends. Optional, like Started.
	LastErr string `json:"e,omitempty"`
	// DispNode and DispReq are the node and request of the DispatchJob
	// still waiting for a start's outcome: every start event carries them
	// until one answers, so that a start retried after a crash still
	// answers the dispatcher.
	DispNode string `json:"rd,omitempty"`
	DispReq  string `json:"rq,omitempty"`
	// StopNode and StopReq are the node and request to answer once a stop
	// completes.
	StopNode string `json:"sr,omitempty"`
	StopReq  string `json:"sq,omitempty"`
	// Trace is the DispatchJob's span context (WithTracerProvider), for
	// the spans of the job's Starts; absent when not traced.
	Trace string `json:"tc,omitempty"`
	// Pending marks a running job whose admission handed it to its worker
	// (the compact form's state letter "p"; worker_claim.go): its Start
	// may still run, and its worker answers the dispatcher itself, so the
	// record says nothing of how the Start went. It reads as running.
	Pending bool `json:"ps,omitempty"`
}

// A job's entry in the jobs hash holds its record and, up to
// maxInlinePayload bytes, its payload: the record's JSON, a newline (JSON
// never holds a raw one), then the payload bytes. One hash entry a job
// instead of one in each of two hashes saves Redis a field, a dict entry
// and a write per dispatch. A larger payload is kept in the payloads hash
// (layout.payloads), so that the record's rewrites (claimed, started,
// moved) do not copy it; so are the payloads of records written before
// payloads moved in. Either way the entry has no newline.

// maxInlinePayload is the largest payload kept in its job's entry.
const maxInlinePayload = 256

// splitRecord splits a jobs hash entry into the record's JSON and the
// payload; ok is false for an entry without one (its payload is in the
// payloads hash).
func splitRecord(raw string) (rec, payload string, ok bool) {
	return strings.Cut(raw, "\n")
}

// parseRecord decodes a record read from the jobs hash: compact (what
// the scripts write, see below) or JSON (what they wrote before, and
// still write for a record the compact form cannot hold).
func parseRecord(raw string) (record, error) {
	rec, _, _ := splitRecord(raw)
	var r record
	if strings.HasPrefix(rec, "{") {
		err := json.Unmarshal([]byte(rec), &r)
		if r.Pending && r.State == stateRunning && r.Started == 0 {
			r.Started = r.Created // as parseCompact reads a handed record
		}
		return r, err
	}
	err := parseCompact(rec, &r)
	return r, err
}

// Record states.
const (
	stateQueued   = "q"   // a start event waits in the job stream
	stateRouted   = "r"   // a start event waits in the worker's stream
	stateClaimed  = "c"   // the worker claimed it: its Start runs
	stateRunning  = "run" // Start succeeded
	stateStopping = "x"   // a stop event is on its way to the worker
)

// Event names in the pool's streams.
const (
	evStart  = "start"
	evStop   = "stop"
	evNotify = "notify"
	evReply  = "reply"
)

// Fields of the pool's counters hash (layout.counters), incremented by
// the scripts in the same call as the change they count, so that a stale
// or fenced script counts nothing.
const (
	counterStarted      = "started"       // startedScript: a Start succeeded
	counterStartsFailed = "starts_failed" // failedScript: a Start failed
	counterRecovered    = "recovered"     // recoverScript: a job routed or queued again
)

// maxLastErrorSize bounds the error text a failed Start leaves in its
// job's record (record.LastErr).
const maxLastErrorSize = 1024

// noReply stands for "nobody waits" in a header's reply fields, and for
// "none" wherever a script expects a node id.
const noReply = "-"

// header is the routing information every start, stop and notify event
// carries in its payload: "nonce gen replyNode requestID", built by the
// scripts' header function. A notify event's payload goes on after a
// newline; a stop event carries the waiting dispatcher, "node request",
// there (noReply for none), so that the worker can tell it the job ended.
type header struct {
	nonce   string
	gen     int64
	replyTo string // node id, or noReply
	reqID   string // request id, or noReply
}

// parseHeader splits an event payload into its header and what follows
// the first newline.
func parseHeader(p []byte) (header, []byte, error) {
	line, rest := p, []byte(nil)
	if i := strings.IndexByte(string(p), '\n'); i >= 0 {
		line, rest = p[:i], p[i+1:]
	}
	f := strings.Fields(string(line))
	if len(f) != 4 {
		return header{}, nil, fmt.Errorf("pool: malformed event header %q", line)
	}
	gen, err := strconv.ParseInt(f[1], 10, 64)
	if err != nil {
		return header{}, nil, fmt.Errorf("pool: malformed generation in %q", line)
	}
	return header{nonce: f[0], gen: gen, replyTo: f[2], reqID: f[3]}, rest, nil
}

// Reply payloads: a status byte, then details.
const (
	replyOK          = 'o' // done
	replyStartFailed = 's' // "s<worker>\n<message>": Start failed
	replyFailed      = 'e' // "e<message>": Stop or HandleNotification failed
	replyNoJob       = 'n' // the worker does not run the job (it moved); details may follow
	replyStopped     = 'x' // "x<message>": the job ended before its Start succeeded
)

// stoppedBeforeStart is the message of a replyStopped for a job that a
// StopJob ended before its Start succeeded.
const stoppedBeforeStart = "StopJob ended it before its Start"

// ref appends a job reference to a script's ARGV: every script that acts
// on a job takes it as key, nonce ("" for any) and generation (-1 for
// any), in this order, and reads it with the prelude's job function.
func ref(args []any, key, nonce string, gen int64) []any {
	return append(args, key, nonce, gen)
}

// prelude is prepended to every script that edits job records, after the
// membership helpers it uses (member.LuaClock, LuaLedger). KEYS[1]
// must be the jobs hash and KEYS[2] the payloads hash. Every other key a
// script touches is declared in its KEYS too, including the streams of
// nodes it answers (a script that may answer nobody gets a placeholder
// key of the pool).
var prelude = member.LuaClock + member.LuaLedger + fmt.Sprintf(`
local FE, FT, FP = %q, %q, %q
local EV_START, EV_STOP, EV_NOTIFY, EV_REPLY = %q, %q, %q, %q
local S_QUEUED, S_ROUTED, S_CLAIMED, S_RUNNING, S_STOPPING = %q, %q, %q, %q, %q
local NO_REPLY = %q
local REV_FIELD = %q
local MAX_INLINE_PAYLOAD = %d
local REPLY_OK, REPLY_START_FAILED, REPLY_STOPPED = %q, %q, %q
local STOPPED_BEFORE_START = %q
local C_STARTED, C_STARTS_FAILED, C_RECOVERED = %q, %q, %q
-- A jobs hash entry is the record's JSON, "\n", the payload (wire.go);
-- an entry without "\n" has its payload in KEYS[2].
-- PAYLOAD keeps the payloads of the entries this call read or wrote, for
-- putrec to write them back.
local PAYLOAD = {}
-- A record is stored compact (wire.go, parseCompact) or, when it cannot
-- be, as JSON; records written before are JSON too.
local STATE_OF = {q = S_QUEUED, r = S_ROUTED, c = S_CLAIMED, u = S_RUNNING, p = S_RUNNING, x = S_STOPPING}
-- encrec writes a running job's record compact, and any other as JSON
-- (queued, routed, claimed and stopping records live for moments and are
-- read and written on the dispatch's path, where cjson is quicker), or
-- when the compact form cannot hold it: the ids the pool makes (nonces,
-- workers, nodes, requests) are hex or "-", and a nonce, a worker or a
-- span context with a space or "=" goes the JSON way.
local function encrec(r)
  local c, n, w, tc = r.c, r.n, r.w, r.tc
  if r.s ~= S_RUNNING or type(c) ~= "number" or type(r.g) ~= "number" or type(r.a) ~= "number"
    or type(n) ~= "string" or type(w) ~= "string" or string.find(n .. w, "[%%s=]")
    or (tc and string.find(tc, "[%%s=]")) then
    return cjson.encode(r)
  end
  local t, st = r.t, r.st
  if not t and st and st >= c and not (r.ps or r.rd or r.rq or r.sr or r.sq or tc or r.e) then
    -- What a running job's record holds: one format, no concatenation.
    return string.format("u %%d %%s %%s %%x %%d st=%%x", r.g, n, w, c, r.a, st - c)
  end
  local s = string.format("%%s %%d %%s %%s %%x %%d", r.ps and "p" or "u", r.g, n, w, c, r.a)
  if t then
    if t >= c then s = s .. string.format(" t=%%x", t - c) else s = s .. string.format(" t=-%%x", c - t) end
  end
  if st and not (r.ps and st == c) then
    if st >= c then s = s .. string.format(" st=%%x", st - c) else s = s .. string.format(" st=-%%x", c - st) end
  end
  if r.rd then s = s .. " rd=" .. r.rd end
  if r.rq then s = s .. " rq=" .. r.rq end
  if r.sr then s = s .. " sr=" .. r.sr end
  if r.sq then s = s .. " sq=" .. r.sq end
  if tc then s = s .. " tc=" .. tc end
  if r.e then s = s .. " e=" .. cjson.encode(r.e) end
  return s
end
local function decfields(s)
  if string.byte(s, 1) == 123 then return cjson.decode(s) end
  local code, g, n, w, c, a, rest = string.match(s, "^(%%a) (%%d+) ([^ ]*) ([^ ]*) (%%x+) (%%d+)(.*)$")
  c = tonumber(c, 16)
  local r = {s = STATE_OF[code], g = tonumber(g), n = n, w = w, c = c, a = tonumber(a)}
  -- A handed record reads as started when created, as Go reads it.
  if code == "p" then r.ps = true; r.st = c end
  if rest ~= "" then
    local e = string.find(rest, " e=", 1, true)
    if e then r.e = cjson.decode(string.sub(rest, e + 3)); rest = string.sub(rest, 1, e - 1) end
    for k, v in string.gmatch(rest, " (%%a+)=([^ ]*)") do
      if k == "t" or k == "st" then
        if string.byte(v, 1) == 45 then r[k] = c - tonumber(string.sub(v, 2), 16) else r[k] = c + tonumber(v, 16) end
      else
        r[k] = v
      end
    end
  end
  return r
end
local function decrec(raw)
  local i = string.find(raw, "\n", 1, true)
  if i then return decfields(string.sub(raw, 1, i - 1)), string.sub(raw, i + 1) end
  return decfields(raw), nil
end
-- compact_worker returns the worker a compact record names (its fourth
-- field: "S GEN NONCE WORKER ..."), read without decoding the record; nil
-- for a JSON one. The walks through the records (recover.go, restart.go)
-- judge most records by it alone.
local function compact_worker(raw)
  if string.byte(raw, 1) == 123 then return nil end
  return string.match(raw, "^%%a %%d+ [^ \n]* ([^ \n]*) ")
end
local function getrec(key)
  local raw = redis.call("HGET", KEYS[1], key)
  if not raw then return nil end
  local r, p = decrec(raw)
  PAYLOAD[key] = p
  return r
end
-- payload_of returns the payload of a job whose record this call read.
local function payload_of(key)
  return PAYLOAD[key] or redis.call("HGET", KEYS[2], key) or ""
end
-- put_payload keeps the payload of a new job: in its entry, written by
-- the putrec that follows, or in KEYS[2] when large.
local function put_payload(key, p)
  if #p <= MAX_INLINE_PAYLOAD then PAYLOAD[key] = p else redis.call("HSET", KEYS[2], key, p) end
end
-- job reads the job reference at ARGV[i], ARGV[i + 1], ARGV[i + 2] (key,
-- nonce or "", generation or -1) and returns the key and its record if
-- the record matches, else the key and nil.
local function job(i)
  local key, nonce, gen = ARGV[i], ARGV[i + 1], tonumber(ARGV[i + 2])
  local r = getrec(key)
  if r and (nonce == "" or r.n == nonce) and (gen < 0 or r.g == gen) then return key, r end
  return key, nil
end
local function putrec(key, r)
  local p = PAYLOAD[key]
  if p then
    redis.call("HSET", KEYS[1], key, encrec(r) .. "\n" .. p)
  else
    redis.call("HSET", KEYS[1], key, encrec(r))
  end
end
local function delrec(key)
  redis.call("HDEL", KEYS[1], key)
  redis.call("HDEL", KEYS[2], key)
end
-- count adds n to field of the pool's counters hash, the key counters.
local function count(counters, field, n)
  if n > 0 then redis.call("HINCRBY", counters, field, n) end
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
  r.s = S_QUEUED; r.g = r.g + 1; r.w = ""; r.t = now; r.st = nil; r.ps = nil
  putrec(key, r)
  send_start(jobstream, key, r)
end
-- reroute hands r, in a new generation, straight to worker owner.
local function reroute(key, r, now, owner, stream)
  r.s = S_ROUTED; r.g = r.g + 1; r.w = owner; r.t = now; r.st = nil; r.ps = nil
  putrec(key, r)
  send_start(stream, key, r)
end
`,
	streamfields.Event, streamfields.Topic, streamfields.Payload,
	evStart, evStop, evNotify, evReply,
	stateQueued, stateRouted, stateClaimed, stateRunning, stateStopping,
	noReply, rmap.RevField, maxInlinePayload,
	string(replyOK), string(replyStartFailed), string(replyStopped),
	stoppedBeforeStart,
	counterStarted, counterStartsFailed, counterRecovered)
