package pool

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strconv"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/shepherd-go/shepherd/internal/member"
	"github.com/shepherd-go/shepherd/internal/redisutil"
	"github.com/shepherd-go/shepherd/limit"
)

// checkKey validates a job key.
func checkKey(key string) error {
	if key == "" {
		return fmt.Errorf("%w: empty", ErrInvalidKey)
	}
	if len(key) > MaxKeySize {
		return fmt.Errorf("%w: %d bytes, the limit is %d", ErrInvalidKey, len(key), MaxKeySize)
	}
	return nil
}

func (n *Node) checkCall(key string, payload []byte) error {
	if err := n.errClosed(); err != nil {
		return err
	}
	if err := checkKey(key); err != nil {
		return err
	}
	if len(payload) > n.cfg.maxPayloadSize {
		return fmt.Errorf("%w: %d bytes, MaxPayloadSize is %d", ErrPayloadTooLarge, len(payload), n.cfg.maxPayloadSize)
	}
	if _, ok := n.shutdown.Get(shutdownFlag); ok {
		return ErrPoolShutdown
	}
	return nil
}

// DispatchJob starts the job key with payload on one worker of the pool
// and returns once that worker's Start has returned. It returns nil when
// Start succeeded: from then on the job runs somewhere in the pool until
// StopJob or Shutdown, across worker and node failures. While no worker
// exists, the job waits in the queue and DispatchJob with it.
//
// Errors: a *StartError when Start failed, or did not return within
// PendingJobTTL 3 times (maxSlowStarts); ErrJobExists, ErrPoolFull,
// ErrInvalidKey, ErrPayloadTooLarge, ErrNodeClosed, ErrPoolShutdown,
// ErrJobStopped; ctx.Err() when ctx ends first; ErrRedisTimeout when
// Redis did not answer the admission within WithCallTimeout.
//
// After any error the job does not run: DispatchJob withdraws what it may
// have admitted, in the background, retrying until Redis answers, and an
// admission that reaches Redis after the withdrawal (Redis was frozen,
// the network slow) is refused. The withdrawal lasts as long as the node
// (Close waits for it, up to Close's ctx): a process that exits without
// Close meanwhile may leave the job to run, and until it is done a
// DispatchJob of the same key may get ErrJobExists.
func (n *Node) DispatchJob(ctx context.Context, key string, payload []byte) error {
	ctx, span := n.startDispatch(ctx, key)
	err := n.dispatchJob(ctx, key, payload, fence{})
	endSpan(span, err)
	return err
}

// dispatchJob is DispatchJob; a schedule's planner passes its fence, so
// that its dispatches are refused once it lost its lease.
func (n *Node) dispatchJob(ctx context.Context, key string, payload []byte, f fence) error {
	began := time.Now()
	if err := n.checkCall(key, payload); err != nil {
		return err
	}
	if err := ctx.Err(); err != nil {
		return err
	}
	if err := n.tooFewReplicas(); err != nil {
		return err
	}
	p, err := n.dispatchPermit(ctx, key)
	if err != nil {
		return err
	}
	defer p.release()
	nonce := newID()
	reqID, ch := n.await(opDispatch, key, nonce)
	t0 := time.Now()
	res, sent, err := n.admit(ctx, key, nonce, payload, reqID, f)
	p.rtt = time.Since(t0)
	if err != nil {
		n.forget(reqID)
		if sent {
			n.withdrawLater(key, nonce) // the admission may run yet
		}
		// Redis failed, or is so slow that the call's deadline passed: a
		// drop. A caller that cancelled says nothing of the load.
		p.told, p.dropped = !errors.Is(ctx.Err(), context.Canceled), true
		return err
	}
	switch res {
	case "OK", "ROUTED":
		n.metrics.add(ctx, n.metrics.dispatched, 1)
		p.told = true
	case "EXISTS":
		n.forget(reqID)
		return fmt.Errorf("%w: %q", ErrJobExists, key)
	case "FULL":
		n.forget(reqID)
		p.told, p.dropped = true, true
		return ErrPoolFull
	case "SHUTDOWN":
		n.forget(reqID)
		return ErrPoolShutdown
	case "FENCED":
		n.forget(reqID)
		return errFenced
	default: // "WITHDRAWN" cannot happen: the nonce is new
		n.forget(reqID)
		return fmt.Errorf("pool: dispatch of %q: unexpected reply %v", key, res)
	}
	select {
	case p := <-ch:
		err := replyError(key, p)
		if err == nil {
			if err = n.confirmJob(ctx, "dispatch", key, nonce, true); err != nil {
				n.withdrawLater(key, nonce)
			}
		}
		return n.metrics.dispatchDone(ctx, began, err)
	case <-ctx.Done():
		n.forget(reqID)
		n.withdrawLater(key, nonce)
		return ctx.Err()
	case <-n.closedChan:
		n.forget(reqID)
		n.withdrawLater(key, nonce)
		return n.errClosed()
	}
}

// Concurrent DispatchJob calls are admitted in batches: a few admitter
// goroutines each take every admission waiting and run their scripts in
// one pipeline, so that 64 concurrent producers cost Redis and the node a
// handful of round trips instead of 64. A DispatchJob that finds no other
// admission under way runs its own at once, on its goroutine: batching
// costs a lone caller nothing.
const (
	admitters      = 4   // pipelines in flight at once
	maxAdmitBatch  = 128 // admissions per pipeline
	admitQueueSize = 1024
)

// admission is one DispatchJob waiting for admitRouteScript.
type admission struct {
	ctx  context.Context
	call scriptCall
	done chan struct{} // closed when call holds the outcome
}

// admit records a new job and either routes it to its worker or queues it
// for the routers (admitRouteScript), through the admitters. When ctx ends
// or the node closes first it returns that error; unless sent is false
// (the admission never left this node), the admission may still run, and
// the caller withdraws the job.
func (n *Node) admit(ctx context.Context, key, nonce string, payload []byte, reqID string, f fence) (res any, sent bool, err error) {
	t := n.table()
	w := t.owner(key)
	stream := n.lay.jobStream // a key of the pool; unused when no worker was chosen
	if w != "" {
		stream = n.lay.wprefix + w
	}
	a := &admission{ctx: ctx, done: make(chan struct{}), call: scriptCall{
		keys: []string{n.lay.jobs, n.lay.payloads, n.lay.jobStream, n.lay.shutdown, n.lay.workers, n.lay.slotsRev, stream, n.lay.withdrawn, f.keyOr(n.lay)},
		args: []any{key, nonce, n.cfg.maxQueuedJobs, payload, n.id, reqID, w, strconv.FormatInt(t.rev, 10), n.injectTrace(ctx), f.token},
	}}
	if n.admitting.Add(1) == 1 {
		// No other admission is under way: go out at once, on this
		// goroutine, without the hop to an admitter.
		cctx, cancel := redisutil.CallContext(ctx, n.cfg.callTimeout)
		a.call.res, a.call.err = n.run(cctx, admitRouteScript, "dispatch", a.call.keys, a.call.args...)
		a.call.err = n.redisTimeout(cctx, "dispatch", a.call.err)
		cancel()
		n.admitting.Add(-1)
		close(a.done)
		return a.call.res, true, a.call.err
	}
	select {
	case n.admissions <- a:
	case <-ctx.Done():
		n.admitting.Add(-1)
		return nil, false, ctx.Err()
	case <-n.closedChan:
		n.admitting.Add(-1)
		return nil, false, n.errClosed()
	}
	select {
	case <-a.done:
		return a.call.res, true, a.call.err
	case <-ctx.Done():
		return nil, true, ctx.Err()
	case <-n.closedChan:
		return nil, true, n.errClosed()
	}
}

// admitLoop runs the admissions waiting in n.admissions, a batch per
// pipeline, until the node stops.
func (n *Node) admitLoop() {
	batch := make([]*admission, 0, maxAdmitBatch)
	calls := make([]*scriptCall, 0, maxAdmitBatch)
	for {
		batch, calls = batch[:0], calls[:0]
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
		for _, a := range batch {
			if err := a.ctx.Err(); err != nil {
				a.call.err = err // its caller left: never admit it
				continue
			}
			calls = append(calls, &a.call)
		}
		if len(calls) > 0 {
			if n.test.admitHook != nil {
				n.test.admitHook(false)
			}
			// The pipeline serves every caller of the batch, each with its
			// own ctx (admit returns when it ends): WithCallTimeout bounds it.
			ctx, cancel := redisutil.CallContext(n.ctx, n.cfg.callTimeout)
			n.runPipelined(ctx, admitRouteScript, "dispatch", calls)
			for _, c := range calls {
				c.err = n.redisTimeout(ctx, "dispatch", c.err)
			}
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

// admitRouteScript records a new job and routes or queues its start
// event. When the dispatching node's copy of the slot table names a
// worker for the key and that copy is current (the fence routeScript
// applies), the event goes straight to the worker's stream, skipping the
// job stream and a router: two hops and two round trips less per job.
// Otherwise it is queued in the job stream for the routers. A dispatch
// whose caller gave up and withdrew it (its nonce is in the withdrawn
// hash) is refused: its command may reach Redis after the withdrawal
// (Redis was frozen, the network slow), and must then do nothing. So is
// a schedule's dispatch whose planner no longer holds the schedule's
// lease (fenced).
//
//	KEYS[1] jobs, KEYS[2] payloads, KEYS[3] job stream, KEYS[4] shutdown
//	map, KEYS[5] workers map, KEYS[6] slots map revision, KEYS[7] the
//	chosen worker's stream (any stream of the pool when none was chosen),
//	KEYS[8] withdrawn dispatches, KEYS[9] the schedule's record (a key of
//	the pool when unfenced)
//	ARGV[1] key, ARGV[2] nonce, ARGV[3] max queued, ARGV[4] payload,
//	ARGV[5] reply node, ARGV[6] request id, ARGV[7] worker id ("" for
//	none), ARGV[8] the slots revision the node decided on, ARGV[9] the
//	DispatchJob's span context ("" when not traced), kept in the record
//	(tc) for the Starts' spans, ARGV[10] the planner's lease token ("":
//	unfenced)
//
// Returns "ROUTED", "OK" (queued), "EXISTS", "FULL", "SHUTDOWN",
// "WITHDRAWN" or "FENCED". The bound counts only jobs waiting in the job stream: a
// routed job does not wait there.
var admitRouteScript = redis.NewScript(prelude + luaFence + `
if fenced(KEYS[9], ARGV[10]) then return "FENCED" end
if was_withdrawn(KEYS[8], ARGV[2]) then return "WITHDRAWN" end
if redis.call("HEXISTS", KEYS[4], "shutdown") == 1 then return "SHUTDOWN" end
if redis.call("HEXISTS", KEYS[1], ARGV[1]) == 1 then return "EXISTS" end
local now = now_ms()
local r = {s = S_QUEUED, g = 1, n = ARGV[2], w = "", t = now, c = now, a = 0, rd = ARGV[5], rq = ARGV[6]}
if ARGV[9] and ARGV[9] ~= "" then r.tc = ARGV[9] end
if ARGV[7] ~= "" and redis.call("HGET", KEYS[6], REV_FIELD) == ARGV[8]
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

// withdrawLater withdraws in the background: against a hung Redis the
// withdrawal lasts as long as Redis hangs, and the caller's deadline is
// over. A node that finished stopping tries once, at once.
func (n *Node) withdrawLater(key, nonce string) {
	if !n.background.Go(func() { n.withdraw(n.background.Context(), key, nonce) }) {
		ctx, cancel := context.WithTimeout(context.Background(), loopCallTimeout)
		defer cancel()
		n.withdraw(ctx, key, nonce)
	}
}

// withdraw makes sure that the job of a failed DispatchJob does not run:
// it records the dispatch's nonce as withdrawn, so that its admission is
// refused if it reaches Redis later, and stops the job if it was admitted
// (member.Withdraw: until Redis answers or ctx ends, Close gave up
// waiting).
func (n *Node) withdraw(ctx context.Context, key, nonce string) {
	tries, err := member.Withdraw(ctx, loopCallTimeout, func(ctx context.Context) error {
		_, _, err := n.sendRequest(ctx, opStop, key, nonce, noReply, noReply, nil, fence{})
		return err
	}, func(tries int, err error) {
		if tries == 1 {
			n.logger.Warn("withdrawing a failed dispatch: Redis did not answer; retrying until it does",
				slog.String("key", key), slog.Any("error", err))
		}
	})
	switch {
	case err != nil:
		n.logger.Error("withdrawing a failed dispatch was abandoned before Redis answered; the job may run",
			slog.String("key", key), slog.Any("error", err))
	case tries > 1:
		n.logger.Info("withdrew a failed dispatch", slog.String("key", key), slog.Int("attempts", tries))
	}
}

// permit is a DispatchJob's place within WithDispatchLimit: what its
// admission tells the limit, reported when the call returns.
type permit struct {
	tok     limit.Token // zero without a limit: its calls do nothing
	rtt     time.Duration
	told    bool // the admission says something about the load
	dropped bool
}

// dispatchPermit waits for a permit of WithDispatchLimit (none without).
func (n *Node) dispatchPermit(ctx context.Context, key string) (permit, error) {
	if n.dispatchLim == nil {
		return permit{}, nil
	}
	t, err := n.dispatchLim.Acquire(ctx)
	if errors.Is(err, limit.ErrLimitExceeded) {
		n.metrics.add(ctx, n.metrics.dispatchLimited, 1)
		return permit{}, fmt.Errorf("pool: dispatch of %q: no permit within %v (WithDispatchLimit, limit %d): %w",
			key, n.cfg.dispatchWait, n.dispatchLim.Limit(), err)
	}
	if err != nil {
		return permit{}, err
	}
	return permit{tok: t}, nil
}

func (p *permit) release() {
	if p.told {
		p.tok.Report(p.rtt, p.dropped)
	} else {
		p.tok.Ignore()
	}
}

// DispatchLimitStats is what DispatchLimit reports.
type DispatchLimitStats struct {
	Limit    int // concurrent DispatchJob calls allowed now
	InFlight int // calls holding a permit
	Waiting  int // calls waiting for one
}

// DispatchLimit reports the node's dispatch limit (WithDispatchLimit);
// all zero without one.
func (n *Node) DispatchLimit() DispatchLimitStats {
	if n.dispatchLim == nil {
		return DispatchLimitStats{}
	}
	return DispatchLimitStats{Limit: n.dispatchLim.Limit(), InFlight: n.dispatchLim.InFlight(), Waiting: n.dispatchLim.Waiting()}
}
