package queue

import (
	"context"
	"fmt"
	"runtime"
	"sync/atomic"
	"time"

	"github.com/shepherd-go/shepherd/internal/backoff"
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
// withdrawal (held up in a frozen server), it is refused there. The limit: a worker that takes the task between the
// Submit reaching Redis and its withdrawal runs it (it is cancelled if
// still running, and the log says so at WARN). That takes an instant
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

// withdrawnTTL is how long a queue remembers a withdrawn Submit: one
// that reaches Redis later than that (held up in a frozen server) is
// queued after all.
const withdrawnTTL = 10 * time.Minute

// withdraw takes back a failed Submit (see withdrawScript), retrying
// until Redis answers or the Queue closes.
func (q *Queue) withdraw(r *submitReq) {
	f := r.f
	started := q.withdrawals.Go(func() {
		ctx := q.withdrawals.Context()
		bo := backoff.Backoff{Min: 100 * time.Millisecond, Max: 2 * time.Second}
		for fails := 0; ; fails++ {
			cctx, cancel := redisutil.CallContext(ctx, q.cfg.callTimeout)
			res, err := script.Run(cctx, q.rdb, withdrawScript, "queue: withdraw a failed submit", q.lay.common(),
				q.lay.commonArgs(f.id, r.nonce, withdrawnTTL.Milliseconds())...)
			cancel()
			if err == nil {
				if res == "CANCELLED" {
					q.logger.Warn("a failed Submit's task was taken by a worker before it could be withdrawn; it is cancelled, but may have run", "task", f.id)
				}
				return
			}
			if ctx.Err() != nil {
				q.logger.Error("a failed Submit's task could not be withdrawn before Close; it may run", "task", f.id, "error", err)
				return
			}
			if fails == 0 {
				q.logger.Warn("withdrawing a failed Submit's task failed; retrying", "task", f.id, "error", err)
			}
			backoff.Sleep(bo.Next(), ctx.Done())
		}
	})
	if !started {
		q.logger.Error("a failed Submit's task could not be withdrawn: the Queue is closed; it may run", "task", f.id)
	}
}

func (q *Queue) forget(f *Future) {
	q.mu.Lock()
	if q.futures[f.id] == f {
		delete(q.futures, f.id)
	}
	q.mu.Unlock()
}
