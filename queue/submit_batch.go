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
)

// How Submits reach Redis: each shard's submitters (submitLoop) gather the
// Submits waiting and queue them in one submitScript call (submitBatch).

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
