package queue

import (
	"context"
	"errors"
	"fmt"
	"runtime"
	"strings"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/shepherd-go/shepherd/internal/redisutil"
	"github.com/shepherd-go/shepherd/internal/replica"
	"github.com/shepherd-go/shepherd/internal/script"
	"github.com/shepherd-go/shepherd/internal/tracectx"
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
//
// With WithTracerProvider, Submit runs in a producer span whose context
// travels with the task to the attempts' spans (trace.go).
func (q *Queue) Submit(ctx context.Context, payload []byte, opts ...SubmitOption) (*Future, error) {
	ctx, span := q.startSend(ctx)
	f, err := q.submit(ctx, payload, opts...)
	if span != nil {
		id := ""
		if f != nil {
			id = f.ID()
		}
		endSend(span, id, err)
	}
	return f, err
}

func (q *Queue) submit(ctx context.Context, payload []byte, opts ...SubmitOption) (*Future, error) {
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
	shard, err := q.placeTask(sc)
	if err != nil {
		return nil, err
	}
	id, nonce := sc.id, ""
	if id == "" {
		// A fresh random id tells this Submit from any other: it is
		// its nonce too, and the task stores none (wire.go).
		id = shardIDPrefix(shard, len(q.known())) + newTaskID()
		nonce = id
	} else {
		nonce = randomID(8)
	}
	f := newFuture(q, id)
	f.shard = shard
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
	r := &submitReq{f: f, payload: payload, sc: sc, delay: delay, nonce: nonce, shard: shard, done: make(chan error, 1)}
	if q.cfg.tracer != nil {
		r.trace = tracectx.Inject(ctx)
	}
	select {
	case q.submits[shard] <- r:
	case <-ctx.Done():
		q.forget(f)
		return nil, ctx.Err()
	case <-q.tasks.Context().Done():
		q.forget(f)
		return nil, ErrClosed
	}
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
	if r.firstOf != "" {
		q.m.deduplicated.Add(ctx, 1, q.m.attrs)
		return q.duplicateOf(r.firstOf), nil
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
	shard   int          // the shard it goes to (placeTask)
	firstOf string       // the task id holding its deduplication key, when it is a duplicate
	trace   string       // its span context (trace.go), "" when not traced
	state   atomic.Int32 // reqPending → reqTaken → reqAnswered, or → reqAbandoned
	done    chan error   // capacity 1
}

const (
	reqPending = iota
	reqTaken
	reqAnswered
	reqAbandoned // its Submit returned an error already
)

// Submitters and their batches: each shard has submitters of its own,
// so that a shard whose Redis does not answer holds back no Submit to
// another: submitters for an unsharded queue, minSubmitters or more a
// shard for a sharded one (shardSubmitters).
const (
	submitters     = 4
	minSubmitters  = 2
	maxSubmitBatch = 128
)

// shardSubmitters is how many submitters each of n shards has: the
// unsharded queue's 4 split between the shards, at least 2 a shard. A
// call's batch is the Submits that came while the shard's other calls
// were out, so more calls out make smaller batches and more calls: 4 a
// shard made 3 shards' Submits cost 2.2 times the calls of one
// (SHEPHERD_COST_SHARDS=3 BenchmarkCostPerTask: 0.151 calls a task
// against 0.069), every call paying a call's fixed cost. Two keep one
// call free while the other waits on a slow Redis.
func shardSubmitters(n int) int { return max(minSubmitters, submitters/n) }

// submitLoop is a submitter of shard l: it takes the waiting Submits of
// the shard from in, up to maxSubmitBatch, and queues them in one script
// call (submitBatch).
func (q *Queue) submitLoop(l layout, in <-chan *submitReq) {
	ctx := q.tasks.Context()
	batch := make([]*submitReq, 0, maxSubmitBatch)
	for {
		batch = batch[:0]
		select {
		case r := <-in:
			batch = append(batch, r)
		case <-ctx.Done():
			return
		}
		// Let the other Submits being called now join this batch.
		runtime.Gosched()
	more:
		for len(batch) < maxSubmitBatch {
			select {
			case r := <-in:
				batch = append(batch, r)
			default:
				break more
			}
		}
		if len(q.submits) > 1 {
			q.roundRobin.Add(1) // the next Submits placed by none of their own go to the next shard
		}
		q.submitBatch(ctx, l, batch)
	}
}

// submitBatch queues the Submits of batch, all of shard l, that still
// wait (their callers did not give up) in one submitScript call, and
// answers each.
func (q *Queue) submitBatch(ctx context.Context, l layout, batch []*submitReq) {
	taken := batch[:0]
	for _, r := range batch {
		if r.state.CompareAndSwap(reqPending, reqTaken) {
			taken = append(taken, r)
		}
	}
	if len(taken) == 0 {
		return
	}
	if err := q.tooFewReplicas(l); err != nil {
		for _, r := range taken {
			if r.state.CompareAndSwap(reqTaken, reqAnswered) {
				q.forget(r.f) // nothing was written
				r.done <- err
			}
		}
		return
	}
	args := l.commonArgs(q.proc, q.cfg.maxQueued)
	for _, r := range taken {
		if r.plain() {
			args = append(args, r.f.id, r.payload, "")
			continue
		}
		args = append(args, r.f.id, r.payload, "1", r.sc.maxAttempts, r.sc.timeout.Milliseconds(),
			r.delay.Milliseconds(), r.sc.retention.Milliseconds(), r.nonce, r.sc.tenant, r.sc.batch, r.sc.policy.code(),
			r.sc.priority, r.sc.dedupKey, r.sc.dedupWindow.Milliseconds(), r.trace)
	}
	// The call serves every Submit of the batch, each with its own ctx:
	// WithCallTimeout bounds it, and a Submit whose ctx ends first stops
	// waiting on its own (and withdraws its task).
	cctx, cancel := redisutil.CallContext(ctx, q.cfg.callTimeout)
	res, err := script.RunAcked(cctx, q.rdb, submitScript, "queue: submit", l.common(), q.cfg.ack, args...)
	err = q.redisTimeout(cctx, "submit", err)
	cancel()
	// Queued on the master but not acknowledged by enough replicas: the
	// tasks the script queued fail as after a failed call (withdrawn),
	// those it refused keep their refusal.
	var unacked error
	if errors.Is(err, replica.ErrNotReplicated) && res != nil {
		unacked = fmt.Errorf("%w: %w; the task is withdrawn", ErrNotReplicated, err)
		err = nil
	}
	out, _ := res.([]any)
	if n, ok := res.(int64); ok && int(n) == len(taken) {
		out = nil // every task queued: the script says so with their count
		for range taken {
			out = append(out, "OK")
		}
	}
	if err == nil && len(out) != len(taken) {
		err = fmt.Errorf("queue: submit: unexpected reply %v", res)
	}
	for i, r := range taken {
		var rerr error
		switch {
		case err != nil:
			rerr = err
		case out[i] == "OK" && unacked != nil:
			rerr = unacked
		case out[i] == "OK":
		case out[i] == "DUP":
			rerr = fmt.Errorf("%w: %q", ErrDuplicateTask, r.f.id)
		case out[i] == "FULL" && len(q.known()) > 1:
			rerr = fmt.Errorf("%w: %d unfinished tasks in its shard (%d)", ErrQueueFull, q.cfg.maxQueued, l.shard)
		case out[i] == "FULL":
			rerr = fmt.Errorf("%w: %d unfinished tasks", ErrQueueFull, q.cfg.maxQueued)
		case out[i] == "BATCHFAILED":
			rerr = fmt.Errorf("%w: batch %s", ErrBatchFailed, r.sc.batch)
		case out[i] == "UNKNOWN":
			q.m.tenantRefused(ctx, "unknown")
			rerr = fmt.Errorf("%w: %q", ErrUnknownTenant, r.sc.tenant)
		case strings.HasPrefix(fmt.Sprint(out[i]), "DEDUP:"):
			r.firstOf = strings.TrimPrefix(fmt.Sprint(out[i]), "DEDUP:")
			q.forget(r.f) // nothing queued: it follows the first task
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
		case err == nil && (unacked == nil || out[i] != "OK"):
			// Refused by the script: nothing was written.
			q.forget(r.f)
			r.done <- rerr
		default:
			// The call failed (or its writes were not replicated): the
			// task may be queued. Its Submit fails, so it must not run.
			q.forget(r.f)
			r.done <- rerr
			q.withdraw(r)
		}
	}
}

// plain tells whether r's task is submitted with every option at its
// default and a random id (its own nonce): submitScript then takes its id
// and payload alone, 3 arguments instead of 15 (each argument costs Redis
// a string to parse and another for Lua).
func (r *submitReq) plain() bool {
	sc := r.sc
	return sc.maxAttempts == DefaultMaxAttempts && sc.timeout == DefaultTimeout && r.delay == 0 &&
		sc.retention == DefaultRetention && r.nonce == r.f.id && sc.tenant == "" && sc.batch == "" &&
		sc.priority == 0 && sc.dedupKey == "" && r.trace == ""
}

// forget stops waiting for f's outcome (its Submit failed).
func (q *Queue) forget(f *Future) {
	q.mu.Lock()
	if q.futures[f.id] == f {
		delete(q.futures, f.id)
	}
	q.mu.Unlock()
}

// submitFn queues tasks one at a time (queueTask) and then, in one go,
// pushes the waiting ones, adds the delayed ones and counts them
// (queued). submitScript runs it for a batch of Submits, the scheduler's
// tick script for the ticks of its schedules.
const submitFn = `
local P_DEDUP = string.sub(P_TASK, 1, -6) .. 'dedup:'
local q_ready, q_order, q_delayed, q_queued = {}, {}, {}, 0
local q_count, q_withdrawn, q_t, q_ts

-- queueTask queues the task id submitted by process sub at t, or says why
-- not: "WITHDRAWN" (its Submit failed and withdrew it before it got
-- here), "UNKNOWN" (its tenant is not registered), "BATCHFAILED" (its
-- fail-fast batch failed already), "DUP" (the id is known), "DEDUP:ID"
-- (its deduplication key is held by task ID) or "FULL" (limit: max
-- unfinished tasks, 0 for none). A refused task writes nothing. tc, the
-- Submit's span context, may be nil or "" (not traced).
local function queueTask(t, sub, limit, id, payload, maxAtt, timeout, delay, ret, nonce, ten, b, pol, pri, dkey, dwin, tc)
  if not q_count then
    q_count = tonumber(redis.call('GET', K_COUNT) or '0')
    q_withdrawn = redis.call('EXISTS', K_WITHDRAWN) == 1
  end
  local tk = P_TASK .. id
  if q_withdrawn and was_withdrawn(K_WITHDRAWN, nonce) then return 'WITHDRAWN' end
  if ten ~= '' and not redis.call('HGET', K_TEN, 'c:' .. ten) then return 'UNKNOWN' end
  if b ~= '' and pol == 'ff' and redis.call('HGET', P_BATCH .. b, 'first') then return 'BATCHFAILED' end
  -- A random id (70 random bits, made by Submit: its nonce is the id) is not
  -- looked up: only a caller's id (WithTaskID) or a tick's can be known.
  if nonce ~= id and (recs[id] or redis.call('HEXISTS', recKey(id), id) == 1 or redis.call('EXISTS', tk) == 1) then return 'DUP' end
  if dkey ~= '' then
    local first = redis.call('GET', P_DEDUP .. dkey)
    if first then return 'DEDUP:' .. first end
  end
  if limit > 0 and q_count >= limit then return 'FULL' end
  q_count = q_count + 1
  q_queued = q_queued + 1
  local st = 'waiting'
  if delay > 0 then st = 'delayed' end
  -- Fields equal to their readers' default are left out (wire.go).
  if q_t ~= t then q_t, q_ts = t, tostring(t) end
  local r = {}
  r['st'], r['sub'], r['enq'] = st, sub, q_ts
  if maxAtt ~= '` + defaultMaxField + `' then r['max'] = maxAtt end
  if timeout ~= '` + defaultTimeoutField + `' then r['to'] = timeout end
  if ret ~= '` + defaultRetentionField + `' then r['ret'] = ret end
  if delay > 0 then r['due'] = string.format('%d', t + delay) end
  if nonce ~= id then r['n'] = nonce end
  if ten ~= '' then r['ten'] = ten end
  if pri > 0 then r['pri'] = tostring(pri) end
  if tc and tc ~= '' then r['tc'] = tc end
  if dkey ~= '' then
    redis.call('SET', P_DEDUP .. dkey, id, 'PX', dwin)
    r['dk'] = dkey
  end
  if b ~= '' then r['b'] = b end
  if #payload > ` + recordMaxPayloadText + ` then
    -- A large payload: the task is a hash of its own (wire.go, "Records").
    local f = {'HSET', tk, 'p', payload}
    for k, v in pairs(r) do f[#f + 1] = k; f[#f + 1] = v end
    redis.call(unpack(f))
  else
    recNew(id, r, payload)
  end
  if ten ~= '' then redis.call('HINCRBY', K_TEN, 'n:' .. ten, 1) end
  if b ~= '' then
    if redis.call('HINCRBY', P_BATCH .. b, 'n', 1) == 1 then redis.call('HSET', P_BATCH .. b, 'pol', pol) end
    redis.call('RPUSH', P_BTASKS .. b, id)
    -- Kept while it has unfinished tasks (finish sets the expiry).
    redis.call('PERSIST', P_BATCH .. b)
    redis.call('PERSIST', P_BTASKS .. b)
  end
  if delay > 0 then
    q_delayed[#q_delayed + 1] = t + delay
    q_delayed[#q_delayed + 1] = id
  else
    local g = ten .. '\n' .. pri
    if not q_ready[g] then q_ready[g] = {}; q_order[#q_order + 1] = {ten, pri, g} end
    q_ready[g][#q_ready[g] + 1] = id
  end
  return 'OK'
end

-- queued pushes what queueTask queued, and wakes the idle workers.
local function queued()
  if q_queued == 0 then return end
  recSave()
  for _, o in ipairs(q_order) do pushReady(o[1], q_ready[o[3]], true, o[2]) end
  bulk('ZADD', K_DELAYED, q_delayed)
  redis.call('INCRBY', K_COUNT, q_queued)
  wake()
end
`

// submitScript queues a batch of tasks, each on its own: one refused
// does not stop the others.
//
//	ARGV[4] submitting process, ARGV[5] max queued, then per task: id,
//	payload and "" when every option is at its default and the id is its
//	own nonce (submitReq.plain); else id, payload, "1", max attempts,
//	timeout (ms), delay (ms, 0: now), retention (ms), the Submit's
//	nonce, the tenant ("" for none), the batch ("" for none), its policy
//	("ff" fail-fast, "ca" collect-all), the priority (0 to MaxPriority),
//	the deduplication key ("" for none), its window (ms) and the
//	Submit's span context ("" when not traced)
//
// Returns how many tasks it queued when it queued them all, else one
// status per task, as queueTask's.
var submitScript = redis.NewScript(prelude + submitFn + `
local t = now()
local limit = tonumber(ARGV[5])
local out, all = {}, true
local i = 6
while i <= #ARGV do
  local st
  if ARGV[i + 2] == '' then
    st = queueTask(t, ARGV[4], limit, ARGV[i], ARGV[i + 1], '` + defaultMaxField + `', '` + defaultTimeoutField + `', 0,
      '` + defaultRetentionField + `', ARGV[i], '', '', 'ff', 0, '', '0', '')
    i = i + 3
  else
    st = queueTask(t, ARGV[4], limit, ARGV[i], ARGV[i + 1], ARGV[i + 3], ARGV[i + 4], tonumber(ARGV[i + 5]),
      ARGV[i + 6], ARGV[i + 7], ARGV[i + 8], ARGV[i + 9], ARGV[i + 10], tonumber(ARGV[i + 11]), ARGV[i + 12], ARGV[i + 13],
      ARGV[i + 14])
    i = i + 15
  end
  out[#out + 1] = st
  all = all and st == 'OK'
end
queued()
if all then return #out end
return out
`)

// placeTask is the shard of a task to submit (shard.go): its tenant's,
// else its batch's, else its deduplication key's, else its caller's
// id's, else round the shards (a submitScript call at a time). A batch's tasks share a
// shard: a task of a tenant on another shard than its batch's is
// refused.
func (q *Queue) placeTask(sc submitConfig) (int, error) {
	n := len(q.known())
	if n == 1 {
		return 0, nil
	}
	shard := -1
	switch {
	case sc.tenant != "":
		shard = shardOfKey(sc.tenant, n)
	case sc.dedupKey != "" && sc.batchOf == nil:
		shard = shardOfKey(sc.dedupKey, n)
	case sc.id != "" && sc.batchOf == nil:
		shard = shardOfKey(sc.id, n)
	}
	if sc.batchOf != nil {
		return sc.batchOf.place(shard, sc.tenant)
	}
	if shard < 0 {
		// Round the shards a submitScript call at a time (each
		// submitLoop's batch moves on): the Submits waiting for one call
		// share a shard, and so that call, as on an unsharded queue.
		shard = int(q.roundRobin.Load() % uint64(n))
	}
	return shard, nil
}
