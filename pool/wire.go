package pool

import (
	"fmt"
	"strconv"
	"strings"

	"github.com/shepherd-go/shepherd/internal/streamfields"
	"github.com/shepherd-go/shepherd/rmap"
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
// and event names, the record states, the reply codes, the field of a
// replicated map's revision (rmap.RevField), and helpers that
// read and write records (KEYS[1] must be the jobs hash and KEYS[2] the
// payloads hash) and send events. An event's payload is its header
// "nonce gen replyNode requestID" (noReply for none), and for notify
// events a newline and the notification payload (see header in event.go).
var prelude = fmt.Sprintf(`
local FE, FT, FP = %q, %q, %q
local EV_START, EV_STOP, EV_NOTIFY, EV_REPLY = %q, %q, %q, %q
local S_QUEUED, S_ROUTED, S_CLAIMED, S_RUNNING, S_STOPPING = %q, %q, %q, %q, %q
local NO_REPLY = %q
local REV_FIELD = %q
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
	streamfields.Event, streamfields.Topic, streamfields.Payload,
	evStart, evStop, evNotify, evReply,
	stateQueued, stateRouted, stateClaimed, stateRunning, stateStopping,
	noReply, rmap.RevField,
	string(replyOK), string(replyStartFailed), string(replyStopped))

// Event names in the pool's streams.
const (
	evStart  = "start"
	evStop   = "stop"
	evNotify = "notify"
	evReply  = "reply"
)

// noReply stands for "nobody waits" in a header's reply fields.
const noReply = "-"

// header is the routing information every start, stop and notify event
// carries in its payload: "nonce gen replyNode requestID".
type header struct {
	nonce   string
	gen     int64
	replyTo string // node id, or noReply
	reqID   string // request id, or noReply
}

func (h header) String() string {
	return h.nonce + " " + strconv.FormatInt(h.gen, 10) + " " + h.replyTo + " " + h.reqID
}

// parseHeader splits an event payload into its header and, for notify
// events, the notification payload after the first newline.
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
