package queue

import (
	"context"
	"fmt"
	"runtime"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/shepherd-go/shepherd/internal/redisutil"
	"github.com/shepherd-go/shepherd/internal/script"
)

// Submit queues a task with payload (which may be empty) and returns once
// it is durably queued (as durable as the Redis's persistence), with a
// future of its outcome. Tasks must be idempotent: an attempt interrupted
// by a crash, a pause longer than the TTL or a lost reply runs again.
//
// Concurrent Submits of a process are queued in batches, one script call
// each, by a few submitter goroutines. A Submit stops waiting as soon as
// its ctx ends; the call of its batch serves other Submits too, so it is
// bounded by WithCallTimeout (5s by default), not by any one ctx.
//
// Errors: ErrInvalidOption (a bad option), ErrPayloadTooLarge,
// ErrDuplicateTask (WithTaskID of a task the queue still knows),
// ErrUnknownTenant (WithTenant of a tenant not registered), ErrQueueFull,
// ErrClosed, ctx.Err() when ctx ends first, ErrRedisTimeout when Redis
// did not answer the call within WithCallTimeout (it does not match
// context.DeadlineExceeded: ctx did not end), or another Redis error of
// the call. A Submit that fails does not queue its task: when the
// failure came after Redis may have received it (a lost reply, a
// timeout, ctx ending meanwhile), the Submit is withdrawn in the
// background until Redis answers, and if it reaches Redis after its
// withdrawal (held up in a frozen server), it is refused there. The
// limit: a worker of another process that takes the task between the
// Submit reaching Redis and its withdrawal runs it (it is cancelled if
// still running, and the log says so at WARN); this process's own
// workers do not start it. That takes an instant
// while Redis runs, but may happen when Redis dies after receiving the
// Submit and comes back with it (AOF): the withdrawal then races with the
// workers. The chaos suite measures how often (examples/chaos).
// A Submit of the same WithTaskID may follow at once.
func (q *Queue) Submit(ctx context.Context, payload []byte, opts ...SubmitOption) (*Future, error) {
	sc := defaultSubmitConfig()
	for _, o := range opts {
		if o == nil {
			return nil, invalid("nil submit option")
		}
		if err := o(&sc); err != nil {
			return nil, err
		}
	}
	if len(payload) > q.cfg.maxPayloadSize {
		return nil, fmt.Errorf("%w: %d bytes, MaxPayloadSize is %d", ErrPayloadTooLarge, len(payload), q.cfg.maxPayloadSize)
	}
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	delay := sc.delay
	if !sc.dueAt.IsZero() {
		delay = max(time.Until(sc.dueAt), 0)
	}
	id := sc.id
	if id == "" {
		id = randomID(12)
	}
	f := newFuture(id)
	q.mu.Lock()
	if q.closed {
		q.mu.Unlock()
		return nil, ErrClosed
	}
	if _, dup := q.futures[id]; dup {
		q.mu.Unlock()
		return nil, fmt.Errorf("%w: %q", ErrDuplicateTask, id)
	}
	// Registered before the script runs: the outcome can be published
	// before the script's reply reaches us.
	q.futures[id] = f
	q.mu.Unlock()

	start := time.Now()
	r := &submitReq{f: f, payload: payload, sc: sc, delay: delay, nonce: randomID(8), done: make(chan error, 1)}
	select {
	case q.submits <- r:
	case <-ctx.Done():
		q.forget(f)
		return nil, ctx.Err()
	case <-q.tasks.Context().Done():
		q.forget(f)
		return nil, ErrClosed
	}
	var err error
	answered := false
	select {
	case err = <-r.done:
		answered = true
	case <-ctx.Done():
		err = ctx.Err()
	case <-q.tasks.Context().Done():
		err = ErrClosed
	}
	if !answered {
		switch {
		case r.state.CompareAndSwap(reqPending, reqAbandoned):
			// Not sent: nothing to take back.
			q.forget(f)
		case r.state.CompareAndSwap(reqTaken, reqAbandoned):
			// On its way to Redis: withdraw it now, so that the
			// withdrawal is queued behind it if Redis hangs.
			q.forget(f)
			q.withdraw(r)
		default:
			// The submitter answered first: the answer stands.
			err = <-r.done
		}
	}
	if err != nil {
		return nil, err
	}
	f.submitted.Store(true)
	q.m.submitted.Add(ctx, 1, q.m.attrs)
	q.m.submitDuration.Record(ctx, time.Since(start).Seconds(), q.m.attrs)
	return f, nil
}

// A submitReq is one Submit waiting for its batch.
type submitReq struct {
	f       *Future
	payload []byte
	sc      submitConfig
	delay   time.Duration
	nonce   string       // tells this Submit from another of the same id
	state   atomic.Int32 // reqPending → reqTaken → reqAnswered, or → reqAbandoned
	done    chan error   // capacity 1
}

const (
	reqPending = iota
	reqTaken
	reqAnswered
	reqAbandoned // its Submit returned an error already
)

// Submitters and their batches.
const (
	submitters     = 4
	maxSubmitBatch = 128
)

// submitLoop is a submitter: it takes the waiting Submits, up to
// maxSubmitBatch, and queues them in one script call.
func (q *Queue) submitLoop() {
	ctx := q.tasks.Context()
	batch := make([]*submitReq, 0, maxSubmitBatch)
	for {
		batch = batch[:0]
		select {
		case r := <-q.submits:
			batch = append(batch, r)
		case <-ctx.Done():
			return
		}
		// Let the other Submits being called now join this batch.
		runtime.Gosched()
	more:
		for len(batch) < maxSubmitBatch {
			select {
			case r := <-q.submits:
				batch = append(batch, r)
			default:
				break more
			}
		}
		q.submitBatch(ctx, batch)
	}
}

// submitBatch queues the Submits of batch that still wait (their callers
// did not give up) in one submitScript call, and answers each.
func (q *Queue) submitBatch(ctx context.Context, batch []*submitReq) {
	taken := batch[:0]
	for _, r := range batch {
		if r.state.CompareAndSwap(reqPending, reqTaken) {
			taken = append(taken, r)
		}
	}
	if len(taken) == 0 {
		return
	}
	args := q.lay.commonArgs(q.proc, q.cfg.maxQueued)
	for _, r := range taken {
		args = append(args, r.f.id, r.payload, r.sc.maxAttempts, r.sc.timeout.Milliseconds(),
			r.delay.Milliseconds(), r.sc.retention.Milliseconds(), r.nonce, r.sc.tenant, r.sc.batch, r.sc.policy.code())
	}
	// The call serves every Submit of the batch, each with its own ctx:
	// WithCallTimeout bounds it, and a Submit whose ctx ends first stops
	// waiting on its own (and withdraws its task).
	cctx, cancel := redisutil.CallContext(ctx, q.cfg.callTimeout)
	res, err := script.Run(cctx, q.rdb, submitScript, "queue: submit", q.lay.common(), args...)
	err = q.redisTimeout(cctx, "submit", err)
	cancel()
	out, _ := res.([]any)
	if err == nil && len(out) != len(taken) {
		err = fmt.Errorf("queue: submit: unexpected reply %v", res)
	}
	for i, r := range taken {
		var rerr error
		switch {
		case err != nil:
			rerr = err
		case out[i] == "OK":
		case out[i] == "DUP":
			rerr = fmt.Errorf("%w: %q", ErrDuplicateTask, r.f.id)
		case out[i] == "FULL":
			rerr = fmt.Errorf("%w: %d unfinished tasks", ErrQueueFull, q.cfg.maxQueued)
		case out[i] == "BATCHFAILED":
			rerr = fmt.Errorf("%w: batch %s", ErrBatchFailed, r.sc.batch)
		case out[i] == "UNKNOWN":
			q.m.tenantRefused(ctx, "unknown")
			rerr = fmt.Errorf("%w: %q", ErrUnknownTenant, r.sc.tenant)
		case out[i] == "WITHDRAWN":
			rerr = context.Canceled // its Submit gave up; nobody waits for this
		default:
			rerr = fmt.Errorf("queue: submit: unexpected status %v", out[i])
		}
		if !r.state.CompareAndSwap(reqTaken, reqAnswered) {
			continue // its Submit gave up and withdraws it
		}
		switch {
		case rerr == nil:
			r.done <- nil
		case err == nil:
			// Refused by the script: nothing was written.
			q.forget(r.f)
			r.done <- rerr
		default:
			// The call failed: the task may be queued. Its Submit fails,
			// so it must not run.
			q.forget(r.f)
			r.done <- rerr
			q.withdraw(r)
		}
	}
}

// forget stops waiting for f's outcome (its Submit failed).
func (q *Queue) forget(f *Future) {
	q.mu.Lock()
	if q.futures[f.id] == f {
		delete(q.futures, f.id)
	}
	q.mu.Unlock()
}

// submitScript queues a batch of tasks, each on its own: one refused
// does not stop the others.
//
//	ARGV[4] submitting process, ARGV[5] max queued, then per task: id,
//	payload, max attempts, timeout (ms), delay (ms, 0: now), retention
//	(ms), the Submit's nonce, the tenant ("" for none), the batch ("" for
//	none) and its policy ("ff" fail-fast, "ca" collect-all)
//
// Returns one status per task: "OK", "DUP" (the id is known), "FULL",
// "UNKNOWN" (the tenant is not registered), "BATCHFAILED" (its fail-fast
// batch failed already) or "WITHDRAWN" (its Submit failed and withdrew it
// before it got here); a refused task writes nothing.
var submitScript = redis.NewScript(prelude + `
local t = now()
local count = tonumber(redis.call('GET', K_COUNT) or '0')
local limit = tonumber(ARGV[5])
local any_withdrawn = redis.call('EXISTS', K_WITHDRAWN) == 1
local out, ready, order, delayed, queued = {}, {}, {}, {}, 0
for i = 6, #ARGV, 10 do
  local id, ten, b = ARGV[i], ARGV[i + 7], ARGV[i + 8]
  local tk = P_TASK .. id
  if any_withdrawn and was_withdrawn(K_WITHDRAWN, ARGV[i + 6]) then
    out[#out + 1] = 'WITHDRAWN'
  elseif ten ~= '' and not redis.call('HGET', K_TEN, 'c:' .. ten) then
    out[#out + 1] = 'UNKNOWN'
  elseif b ~= '' and ARGV[i + 9] == 'ff' and redis.call('HGET', P_BATCH .. b, 'first') then
    out[#out + 1] = 'BATCHFAILED'
  elseif redis.call('EXISTS', tk) == 1 then
    out[#out + 1] = 'DUP'
  elseif count >= limit then
    out[#out + 1] = 'FULL'
  else
    count = count + 1
    queued = queued + 1
    local delay = tonumber(ARGV[i + 4])
    local st = 'waiting'
    if delay > 0 then st = 'delayed' end
    redis.call('HSET', tk, 'p', ARGV[i + 1], 'st', st, 'att', 0, 'max', ARGV[i + 2], 'to', ARGV[i + 3],
      'sub', ARGV[4], 'ret', ARGV[i + 5], 'enq', t, 'due', t + delay, 'n', ARGV[i + 6], 'ten', ten)
    if ten ~= '' then redis.call('HINCRBY', K_TEN, 'n:' .. ten, 1) end
    if b ~= '' then
      redis.call('HSET', tk, 'b', b)
      if redis.call('HINCRBY', P_BATCH .. b, 'n', 1) == 1 then redis.call('HSET', P_BATCH .. b, 'pol', ARGV[i + 9]) end
      redis.call('RPUSH', P_BTASKS .. b, id)
      -- Kept while it has unfinished tasks (finish sets the expiry).
      redis.call('PERSIST', P_BATCH .. b)
      redis.call('PERSIST', P_BTASKS .. b)
    end
    if delay > 0 then
      delayed[#delayed + 1] = t + delay
      delayed[#delayed + 1] = id
    else
      if not ready[ten] then ready[ten] = {}; order[#order + 1] = ten end
      ready[ten][#ready[ten] + 1] = id
    end
    out[#out + 1] = 'OK'
  end
end
if queued > 0 then
  for _, ten in ipairs(order) do pushReady(ten, ready[ten], true) end
  bulk('ZADD', K_DELAYED, delayed)
  redis.call('INCRBY', K_COUNT, queued)
  wake()
end
return out
`)
