package pool

import (
	"context"
	"errors"
	"fmt"

	"github.com/redis/go-redis/v9"
	"github.com/shepherd-go/shepherd/internal/member"
	"github.com/shepherd-go/shepherd/rmap"
)

// StopJob stops the job key: its worker's Stop runs, and the job is
// deleted from the pool. It returns once Stop has returned (with Stop's
// error, the job being deleted anyway), or at once when the job was not
// running (queued, or its worker gone). It returns ErrJobNotFound for an
// unknown key. When ctx ends first, the stop still completes in the
// background.
func (n *Node) StopJob(ctx context.Context, key string) error {
	return n.part(key).stopJob(ctx, key, fence{})
}

// stopJob is StopJob, fenced by f (a schedule's planner).
func (n *Node) stopJob(ctx context.Context, key string, f fence) error {
	if err := n.checkCall(key, nil); err != nil {
		return err
	}
	return n.request(ctx, opStop, key, nil, f, map[any]error{
		"NOTFOUND": fmt.Errorf("%w: %q", ErrJobNotFound, key),
		"DELETED":  nil,
	})
}

// NotifyWorker delivers payload to the HandleNotification method of the
// worker running key and returns its error. It returns ErrJobNotFound for
// an unknown key, and ErrNoWorker while the job is not running (being
// started or moved): retry then. It also returns ErrNoWorker when the
// worker leaves the pool (or is declared dead) before answering; the
// notification may or may not have been handled then.
func (n *Node) NotifyWorker(ctx context.Context, key string, payload []byte) error {
	return n.part(key).notifyWorker(ctx, key, payload, fence{})
}

// notifyWorker is NotifyWorker, fenced by f (a schedule's planner).
func (n *Node) notifyWorker(ctx context.Context, key string, payload []byte, f fence) error {
	if err := n.checkCall(key, payload); err != nil {
		return err
	}
	return n.request(ctx, opNotify, key, payload, f, map[any]error{
		"NOTFOUND": fmt.Errorf("%w: %q", ErrJobNotFound, key),
		"NOWORKER": fmt.Errorf("%w: %q", ErrNoWorker, key),
	})
}

// request runs stopScript (op opStop) or notifyScript (opNotify), which either settles the
// call at once, with one of the replies in settled, or replies "SENT" (or
// {"SENT", worker}) after sending an event to the job's worker; then it
// waits for the worker's answer on this node's stream, or ctx. When the
// script names the worker and that worker leaves the pool before
// answering (it died, or left with the event unread), request returns
// ErrNoWorker instead of waiting for ctx. (A stop needs no such watch: the
// janitor or the leaving worker answers it.)
func (n *Node) request(ctx context.Context, op, key string, payload []byte, f fence, settled map[any]error) error {
	stopped, err := n.sendAndWait(ctx, op, key, payload, f, settled)
	if err == nil && op == opStop {
		err = n.confirmJob(ctx, "stop", key, stopped, false) // WithReplicas
	}
	return err
}

// sendAndWait is request without the confirmation on the replicas; it
// also returns the nonce of the record it acted on ("" for none).
func (n *Node) sendAndWait(ctx context.Context, op, key string, payload []byte, f fence, settled map[any]error) (string, error) {
	reqID, ch := n.await(op, key, "")
	res, acted, err := n.sendRequest(ctx, op, key, "", n.id, reqID, payload, f)
	if err == nil && res == "FENCED" {
		err = errFenced
	}
	worker, sent := sentTo(res)
	if err == nil && !sent {
		var ok bool
		if err, ok = settled[res]; !ok {
			err = fmt.Errorf("pool: %s: unexpected reply %v", op, res)
		}
	}
	if err != nil || !sent {
		n.forget(reqID)
		return acted, err
	}
	var left <-chan rmap.Event
	if worker != "" {
		events, cancel := n.workers.Subscribe()
		defer cancel()
		left = events
		if _, ok := n.workers.Get(worker); !ok {
			left = closedEvents
		}
	}
	for {
		select {
		case p := <-ch:
			return acted, replyError(key, p)
		case e, ok := <-left:
			relevant := !ok || e.Kind == rmap.EventResync || (e.Kind == rmap.EventDelete && e.Key == worker)
			if !relevant {
				continue
			}
			if _, present := n.workers.Get(worker); present {
				if !ok {
					left = nil // the subscription ended: the node is closing
				}
				continue
			}
			select {
			case p := <-ch: // the answer came just before
				return acted, replyError(key, p)
			default:
			}
			n.forget(reqID)
			return acted, fmt.Errorf("%w: %q: its worker left the pool before answering", ErrNoWorker, key)
		case <-ctx.Done():
			n.forget(reqID)
			return acted, ctx.Err()
		case <-n.closedChan:
			n.forget(reqID)
			return acted, n.errClosed()
		}
	}
}

// closedEvents is a closed channel of map events: a receive from it
// reports at once that the watched worker is already gone.
var closedEvents = func() <-chan rmap.Event {
	c := make(chan rmap.Event)
	close(c)
	return c
}()

// sentTo reports whether a stop or notify script sent its event, and to
// which worker when it says.
func sentTo(res any) (worker string, sent bool) {
	switch v := res.(type) {
	case string:
		return "", v == "SENT"
	case []any:
		if len(v) == 2 && v[0] == "SENT" {
			worker, _ = v[1].(string)
			return worker, true
		}
	}
	return "", false
}

// stopScript starts stopping a job (StopJob), or withdraws the job of a
// DispatchJob whose caller gave up. A withdrawal names the dispatch's
// nonce and records it in the withdrawn ledger (member.Withdraw), so that
// the admission, if it has not reached Redis yet, is refused when it does. The caller read the
// job's record first, to declare the streams the script may write to; if
// the record changed since (its worker or its waiting dispatcher), the
// script does nothing and asks for another try.
//
//	KEYS[1] jobs, KEYS[2] payloads, KEYS[3] workers map, KEYS[4] withdrawn
//	dispatches (the ledger), KEYS[5] the stream of the worker read (a placeholder for
//	none), KEYS[6] the stream of the waiting dispatcher read (a
//	placeholder for none)
//	ARGV[1..3] job ref (nonce "" for any: StopJob; generation read, -1
//	when none), ARGV[4] worker read ("" for none), ARGV[5] dispatcher node
//	read (noReply for none), ARGV[6] reply node, ARGV[7] request id,
//	ARGV[8] how long the ledger keeps a withdrawal (ms); KEYS[7] and
//	ARGV[9] the fence: a schedule's record and its planner's token
//	(unfenced: any key of the pool, and "")
//
// Returns "FENCED" (a planner that lost its lease), "NOTFOUND"; "RETRY" (read again); "DELETED" when no worker runs
// the job (it was queued or its worker is gone): done, and a DispatchJob
// still waiting for the job's start is told that it was stopped; or "SENT"
// when a stop event went to the owner, which answers the reply node when
// Stop has run. The stop event carries the waiting dispatcher after a
// newline ("node request"), for the worker to answer it too.
var stopScript = newScript(prelude + member.LuaTokenFence + `
if token_fenced(KEYS[7], ARGV[9]) then return "FENCED" end
local withdrawal = ARGV[2] ~= ""
if withdrawal then withdraw_call(KEYS[4], ARGV[2], now_ms(), ARGV[8]) end
local key, r = job(1)
if not r then
  local cur = getrec(key)
  if cur and (not withdrawal or cur.n == ARGV[2]) then return "RETRY" end
  return "NOTFOUND"
end
if r.w ~= ARGV[4] or (r.rd or NO_REPLY) ~= ARGV[5] then return "RETRY" end
if r.s == S_QUEUED or r.w == "" or redis.call("HEXISTS", KEYS[3], r.w) == 0 then
  delrec(key)
  if not withdrawal and r.rd then send_reply(KEYS[6], r.rq, REPLY_STOPPED .. STOPPED_BEFORE_START) end
  return "DELETED"
end
r.s = S_STOPPING; r.t = now_ms(); r.sr = ARGV[6]; r.sq = ARGV[7]
putrec(key, r)
redis.call("XADD", KEYS[5], "*", FE, EV_STOP, FT, key, FP,
  header(r, ARGV[6], ARGV[7]) .. "\n" .. (r.rd or NO_REPLY) .. " " .. (r.rq or NO_REPLY))
return "SENT"
`)

// notifyScript sends a notification to a running job's worker. Like
// stopScript, it needs the record read first.
//
//	KEYS[1] jobs, KEYS[2] payloads, KEYS[3] workers map, KEYS[4] the
//	stream of the worker read (a placeholder for none)
//	ARGV[1..3] job ref (any nonce; generation read, -1 when none),
//	ARGV[4] worker read, ARGV[5] reply node, ARGV[6] request id, ARGV[7]
//	payload; KEYS[5] and ARGV[8] the fence, as for stopScript
//
// Returns "FENCED", "NOTFOUND", "RETRY" (read again), "NOWORKER" (the job is not
// running right now: being started or moved) or {"SENT", worker id}.
var notifyScript = newScript(prelude + member.LuaTokenFence + `
if token_fenced(KEYS[5], ARGV[8]) then return "FENCED" end
local key, r = job(1)
if not r then
  if getrec(key) then return "RETRY" end
  return "NOTFOUND"
end
if r.w ~= ARGV[4] then return "RETRY" end
if r.s == S_STOPPING then return "NOTFOUND" end
if r.s ~= S_RUNNING or redis.call("HEXISTS", KEYS[3], r.w) == 0 then return "NOWORKER" end
redis.call("XADD", KEYS[4], "*", FE, EV_NOTIFY, FT, key, FP, header(r, ARGV[5], ARGV[6]) .. "\n" .. ARGV[7])
return {"SENT", r.w}
`)

// maxRequestTries bounds how often a stop or a notification reads the
// job's record again because it changed between the read and the script.
const maxRequestTries = 10

// sendRequest runs stopScript (op opStop: a StopJob, or with nonce a
// withdrawal) or notifyScript (opNotify) for key, reading the job's
// record first for the streams the script writes to, and again when the
// record changed meanwhile. It also returns the nonce of the record it
// acted on ("" for none).
func (n *Node) sendRequest(ctx context.Context, op, key, nonce, replyTo, reqID string, payload []byte, f fence) (any, string, error) {
	for try := 1; ; try++ {
		raw, err := n.rdb.HGet(ctx, n.lay.jobs, key).Result()
		if err != nil && !errors.Is(err, redis.Nil) {
			return nil, "", fmt.Errorf("pool: %s: %w", op, err)
		}
		gen, worker, disp, acted := int64(-1), "", noReply, ""
		if err == nil {
			r, perr := parseRecord(raw)
			if perr != nil {
				return nil, "", fmt.Errorf("pool: %s: job %q: %w", op, key, perr)
			}
			if nonce == "" || r.Nonce == nonce {
				gen, worker, acted = r.Gen, r.Worker, r.Nonce
				if r.DispNode != "" {
					disp = r.DispNode
				}
			}
		}
		var res any
		if op == opNotify {
			res, err = n.run(ctx, notifyScript, op,
				[]string{n.lay.jobs, n.lay.payloads, n.lay.workers, n.streamOf(n.lay.wprefix, worker), f.keyOr(n.lay)},
				append(ref(nil, key, "", gen), worker, replyTo, reqID, payload, f.token)...)
		} else {
			res, err = n.run(ctx, stopScript, op,
				[]string{n.lay.jobs, n.lay.payloads, n.lay.workers, n.lay.withdrawn,
					n.streamOf(n.lay.wprefix, worker), n.streamOf(n.lay.nprefix, disp), f.keyOr(n.lay)},
				append(ref(nil, key, nonce, gen), worker, disp, replyTo, reqID, member.WithdrawnTTL.Milliseconds(), f.token)...)
		}
		if err != nil || res != "RETRY" {
			return res, acted, err
		}
		if try == maxRequestTries {
			return nil, "", fmt.Errorf("pool: %s: job %q kept changing; try again", op, key)
		}
	}
}

// streamOf returns the stream key prefix+id of a worker or node, or a key
// of the pool that stands in for it when there is none (a script's KEYS
// must be keys of the pool, even those it will not touch).
func (n *Node) streamOf(prefix, id string) string {
	if id == "" || id == noReply {
		return n.lay.jobStream
	}
	return prefix + id
}

// Kinds of waiters.
const (
	opDispatch = "dispatch"
	opStop     = "stop"
	opNotify   = "notify"
)
