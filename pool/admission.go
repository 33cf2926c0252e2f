package pool

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/shepherd-go/shepherd/internal/member"
	"github.com/shepherd-go/shepherd/internal/redisutil"
)

// Concurrent DispatchJob calls are admitted in batches: an admitter
// goroutine (admitLoop) takes every admission waiting and admits them all
// in one call of admitRouteScript, so that 64 concurrent producers cost
// Redis a handful of script calls instead of 64 (a call's fixed part, its
// round trip included, is about as much as a job's work in it). A
// DispatchJob that finds no other admission under way runs its own at
// once, on its goroutine: batching costs a lone caller nothing. One
// admitter, not several: while a batch is out, the next one grows (four
// admitters made batches a third as large, and Redis paid 20 % more per
// dispatch in scenario A; BENCHMARKS.md, "Third pass").
const (
	admitters      = 1   // admitLoops (besides a lone caller's call)
	maxAdmitBatch  = 128 // admissions per script call
	admitQueueSize = 1024
)

// admission is one DispatchJob waiting for admitRouteScript.
type admission struct {
	ctx     context.Context
	key     string
	nonce   string
	payload []byte
	reqID   string
	worker  string // the owner in the node's slot table; "" for none
	hand    bool   // the job may be handed to that worker (worker_claim.go)
	rev     string // the revision of that table
	trace   string
	f       fence
	// deadline is when its caller stops waiting (WithCallTimeout from
	// its call), for an admission that waits for an admitLoop.
	deadline time.Time
	res      any
	err      error
	done     chan struct{} // closed when res and err hold the outcome
}

// admit records a new job and either routes it to its worker or queues it
// for the routers (admitRouteScript), through the admitters. When ctx ends
// or the node closes first it returns that error; unless sent is false
// (the admission never left this node), the admission may still run, and
// the caller withdraws the job.
func (n *Node) admit(ctx context.Context, key, nonce string, payload []byte, reqID string, f fence) (res any, sent bool, err error) {
	t := n.table()
	a := &admission{ctx: ctx, key: key, nonce: nonce, payload: payload, reqID: reqID,
		worker: t.owner(key), rev: strconv.FormatInt(t.rev, 10), trace: n.injectTrace(ctx), f: f,
		done: make(chan struct{})}
	a.hand = n.mayHand(a.worker)
	if n.admitting.Add(1) == 1 {
		// No other admission is under way: go out at once, on this
		// goroutine, without the hop to an admitter.
		cctx, cancel := redisutil.CallContext(ctx, n.cfg.callTimeout)
		n.admitBatch(cctx, []*admission{a})
		cancel()
		n.admitting.Add(-1)
		close(a.done)
		return a.res, true, a.err
	}
	// A batch held up by a hung Redis holds up the admissions queued
	// behind it: each waits WithCallTimeout at most, counted from here,
	// and admitLoop leaves out the ones whose time is up.
	a.deadline = time.Now().Add(n.cfg.callTimeout)
	wait := time.NewTimer(n.cfg.callTimeout)
	defer wait.Stop()
	select {
	case n.admissions <- a:
	case <-ctx.Done():
		n.admitting.Add(-1)
		return nil, false, ctx.Err()
	case <-n.closedChan:
		n.admitting.Add(-1)
		return nil, false, n.errClosed()
	case <-wait.C:
		n.admitting.Add(-1)
		return nil, false, n.admitTimedOut()
	}
	select {
	case <-a.done:
		return a.res, true, a.err
	case <-ctx.Done():
		return nil, true, ctx.Err()
	case <-n.closedChan:
		return nil, true, n.errClosed()
	case <-wait.C:
		return nil, true, n.admitTimedOut()
	}
}

// mayHand reports whether a job may be handed to worker by its admission
// (worker_claim.go): not to a worker with a stable id (its entry has a
// restart grace), which claims every job, and whose jobs wait while its
// node restarts: their records say routed or starting meanwhile.
func (n *Node) mayHand(worker string) bool {
	if worker == "" {
		return false
	}
	info, ok := n.workers.Get(worker)
	return ok && !strings.Contains(info, `"grace"`)
}

// admitTimedOut is the error of an admission that waited WithCallTimeout
// for its batch's call.
func (n *Node) admitTimedOut() error {
	return fmt.Errorf("%w: dispatch: no answer within %v (WithCallTimeout)", ErrRedisTimeout, n.cfg.callTimeout)
}

// admitLoop runs the admissions waiting in n.admissions, a batch per
// script call, until the node stops.
func (n *Node) admitLoop() {
	batch := make([]*admission, 0, maxAdmitBatch)
	live := make([]*admission, 0, maxAdmitBatch)
	for {
		batch, live = batch[:0], live[:0]
		select {
		case <-n.ctx.Done():
			return
		case a := <-n.admissions:
			batch = append(batch, a)
		}
	fill:
		for len(batch) < maxAdmitBatch {
			select {
			case a := <-n.admissions:
				batch = append(batch, a)
			default:
				break fill
			}
		}
		now := time.Now()
		for _, a := range batch {
			if err := a.ctx.Err(); err != nil {
				a.err = err // its caller left: never admit it
				continue
			}
			if now.After(a.deadline) {
				a.err = n.admitTimedOut() // so did this one (admit)
				continue
			}
			live = append(live, a)
		}
		if len(live) > 0 {
			if n.test.admitHook != nil {
				n.test.admitHook(false)
			}
			// The call serves every caller of the batch, each with its
			// own ctx (admit returns when it ends): WithCallTimeout bounds it.
			ctx, cancel := redisutil.CallContext(n.ctx, n.cfg.callTimeout)
			n.admitBatch(ctx, live)
			cancel()
			if n.test.admitHook != nil {
				n.test.admitHook(true)
			}
		}
		n.admitting.Add(-int64(len(batch)))
		for _, a := range batch {
			close(a.done)
		}
	}
}

// admitBatch runs admitRouteScript for batch, in one call, and stores
// each admission's outcome in it.
func (n *Node) admitBatch(ctx context.Context, batch []*admission) {
	sk := newScriptKeys(n.lay.jobs, n.lay.payloads, n.lay.jobStream, n.lay.shutdown, n.lay.workers,
		n.lay.slotsRev, n.lay.withdrawn, n.lay.counters)
	args := make([]any, 0, 2+admitArgs*len(batch))
	args = append(args, n.cfg.maxQueuedJobs, n.id)
	for _, a := range batch {
		si, fi := 0, 0
		if a.worker != "" {
			si = sk.add(n.lay.wprefix + a.worker)
		}
		if a.f.token != "" {
			fi = sk.add(a.f.key)
		}
		hand := "0"
		if a.hand {
			hand = "1"
		}
		args = append(args, a.key, a.nonce, a.payload, a.reqID, a.worker, a.rev, si, a.trace, fi, a.f.token, hand)
	}
	res, err := n.run(ctx, admitRouteScript, "dispatch", sk.keys, args...)
	err = n.redisTimeout(ctx, "dispatch", err)
	out, err := perJob(res, err, len(batch), "dispatch")
	for i, a := range batch {
		if err != nil {
			a.err = err
			continue
		}
		a.res = out[i]
	}
}

// admitArgs is how many ARGV admitRouteScript takes per job.
const admitArgs = 11

// admitRouteScript records new jobs, a batch of them (or one) in one
// call, and routes or queues each one's start event. When the
// dispatching node's copy of the slot table names a worker for the key
// and that copy is current (the fence routeScript applies), the event goes
// straight to the worker's stream, skipping the job stream and a router:
// two hops and two round trips less per job. Otherwise it is queued in
// the job stream for the routers. A dispatch whose caller gave up and
// withdrew it (its nonce is in the withdrawn ledger) is refused: its
// command may reach Redis after the withdrawal (Redis was frozen, the
// network slow), and must then do nothing. So is a schedule's dispatch
// whose planner no longer holds the schedule's lease (fenced).
//
//	KEYS[1] jobs, KEYS[2] payloads (of older records), KEYS[3] job stream, KEYS[4] shutdown
//	map, KEYS[5] workers map, KEYS[6] slots map revision, KEYS[7]
//	withdrawn dispatches, KEYS[8] counters, KEYS[9..] the chosen workers' streams and the
//	schedules' records the jobs name
//	ARGV[1] max queued, ARGV[2] reply node, then per job (admitArgs):
//	key, nonce, payload, request id, worker id ("" for none), the slots
//	revision the node decided on, the worker's stream (index into KEYS
//	from KEYS[9] as 1; 0 for none), the DispatchJob's span context (""
//	when not traced; kept in the record, tc, for the Starts' spans), the
//	schedule's record (an index like the stream's; 0: unfenced), the
//	planner's lease token ("": unfenced), "1" when the job may be handed
//	to the worker (Node.mayHand)
//
// A routed job whose payload fits its entry is handed to its worker at
// once: its record says running ("p", record.Pending: one start counted)
// and stays so while the job runs, and its start event carries its
// creation time, span context and payload after the header ("CREATED
// TRACE\nPAYLOAD", worker_claim.go), so that the worker can start it
// without a claimScript call and answer its dispatcher without a
// startedScript call: one script call a dispatch.
//
// Returns, per job, "ROUTED", "OK" (queued), "EXISTS", "FULL",
// "SHUTDOWN", "WITHDRAWN" or "FENCED". The bound counts only jobs waiting
// in the job stream: a routed job does not wait there.
var admitRouteScript = newScript(prelude + member.LuaTokenFence + `
local shut = redis.call("HEXISTS", KEYS[4], "shutdown") == 1
local rev = redis.call("HGET", KEYS[6], REV_FIELD)
-- The ledger exists only while it holds a withdrawal (a sorted set that
-- empties is deleted): read once, it spares a ZSCORE a job.
local ledger = redis.call("EXISTS", KEYS[7]) == 1
local maxq = tonumber(ARGV[1])
local now, nowx, nowd, waiting
local handed = 0
local live = {}
local out = {}
for i = 3, #ARGV, 11 do
  local key, nonce, w, si, fi = ARGV[i], ARGV[i + 1], ARGV[i + 4], tonumber(ARGV[i + 6]), tonumber(ARGV[i + 8])
  local res
  if fi > 0 and token_fenced(KEYS[8 + fi], ARGV[i + 9]) then res = "FENCED"
  elseif ledger and was_withdrawn(KEYS[7], nonce) then res = "WITHDRAWN"
  elseif shut then res = "SHUTDOWN"
  else
    local routed = false
    if si > 0 and ARGV[i + 5] == rev then
      if live[w] == nil then live[w] = redis.call("HEXISTS", KEYS[5], w) == 1 end
      routed = live[w]
    end
    local p = ARGV[i + 2]
    local hand = ARGV[i + 10] == "1"
    if routed and hand and ARGV[i + 7] == "" and #p <= MAX_INLINE_PAYLOAD then
      -- What a dispatch under load takes: handed to its worker, the
      -- record written as it stays while the job runs ("p": running,
      -- worker_claim.go), compact by concatenation (no table, no
      -- encoder: the ids are the pool's, without spaces or "="), and
      -- HSETNX for the existence test and the write. The worker answers
      -- the dispatcher from the event's header, without a script.
      if not nowx then now = now or now_ms(); nowx = string.format("%x", now); nowd = string.format("%d", now) end
      if redis.call("HSETNX", KEYS[1], key, "p 1 " .. nonce .. " " .. w .. " " .. nowx .. " 1\n" .. p) == 0 then
        res = "EXISTS"
      else
        redis.call("XADD", KEYS[8 + si], "*", FE, EV_START, FT, key, FP,
          nonce .. " 1 " .. ARGV[2] .. " " .. ARGV[i + 3] .. "\n" .. nowd .. " \n" .. p)
        handed = handed + 1
        res = "ROUTED"
      end
    elseif redis.call("HEXISTS", KEYS[1], key) == 1 then res = "EXISTS"
    else
      now = now or now_ms()
      local r = {s = S_QUEUED, g = 1, n = nonce, w = "", t = now, c = now, a = 0, rd = ARGV[2], rq = ARGV[i + 3]}
      if ARGV[i + 7] ~= "" then r.tc = ARGV[i + 7] end
      if routed then
        r.s = S_ROUTED; r.w = w
        put_payload(key, p)
        if PAYLOAD[key] and hand then
          -- Handed to the worker, as above, with its span context.
          r.s = S_RUNNING; r.ps = true; r.a = 1; r.t = nil; r.rd = nil; r.rq = nil
          putrec(key, r)
          redis.call("XADD", KEYS[8 + si], "*", FE, EV_START, FT, key, FP,
            header(r, ARGV[2], ARGV[i + 3]) .. "\n" .. r.c .. " " .. (r.tc or "") .. "\n" .. p)
          handed = handed + 1
        elseif PAYLOAD[key] then
          -- Claimed for a worker with a stable id, which claims it again
          -- (worker_claim.go): the event carries what a claim answers.
          r.s = S_CLAIMED; r.a = 1
          putrec(key, r)
          redis.call("XADD", KEYS[8 + si], "*", FE, EV_START, FT, key, FP,
            header(r, r.rd, r.rq) .. "\n" .. r.c .. " " .. (r.tc or "") .. "\n" .. p)
        else
          putrec(key, r)
          send_start(KEYS[8 + si], key, r)
        end
        res = "ROUTED"
      else
        waiting = waiting or redis.call("XLEN", KEYS[3])
        if waiting >= maxq then
          res = "FULL"
        else
          put_payload(key, ARGV[i + 2])
          putrec(key, r)
          send_start(KEYS[3], key, r)
          waiting = waiting + 1
          res = "OK"
        end
      end
    end
  end
  out[#out + 1] = res
end
-- A handed job counts as started now: its worker takes the count back
-- if its Start fails (failedScript).
count(KEYS[8], C_STARTED, handed)
return out
`)
