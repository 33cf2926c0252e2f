package queue

import (
	"context"
	"fmt"
	"sync/atomic"
	"time"

	"github.com/shepherd-go/shepherd/internal/script"
)

// Submit queues a task with payload (which may be empty) and returns once
// it is durably queued (as durable as the Redis's persistence), with a
// future of its outcome. Tasks must be idempotent: an attempt interrupted
// by a crash, a pause longer than the TTL or a lost reply runs again.
//
// Concurrent Submits of a process are queued in batches, one script call
// each, by a few submitter goroutines.
//
// Errors: ErrInvalidOption (a bad option), ErrPayloadTooLarge,
// ErrDuplicateTask (WithTaskID of a task the queue still knows),
// ErrQueueFull, ErrClosed, or the Redis or ctx error of the call. A
// Submit that fails did not queue its task: when the failure came after
// Redis may have received it (a lost reply, ctx ending meanwhile), the
// task is withdrawn in the background as soon as Redis answers (one that
// a worker took meanwhile is cancelled); until then, a Submit of the same
// WithTaskID in this process fails with ErrDuplicateTask.
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
	r := &submitReq{f: f, payload: payload, sc: sc, delay: delay, done: make(chan error, 1)}
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
	select {
	case err = <-r.done:
	case <-ctx.Done():
		err = ctx.Err()
	case <-q.tasks.Context().Done():
		err = ErrClosed
	}
	if err != nil {
		if !r.state.CompareAndSwap(reqPending, reqAbandoned) && !r.state.CompareAndSwap(reqTaken, reqAbandoned) {
			// The submitter answered first: the answer stands.
			select {
			case err = <-r.done:
			default:
			}
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
		} else {
			q.forget(r.f)
		}
	}
	if len(taken) == 0 {
		return
	}
	args := q.lay.commonArgs(q.proc, q.cfg.maxQueued)
	for _, r := range taken {
		args = append(args, r.f.id, r.payload, r.sc.maxAttempts, r.sc.timeout.Milliseconds(),
			r.delay.Milliseconds(), r.sc.retention.Milliseconds())
	}
	cctx, cancel := context.WithTimeout(ctx, loopCallTimeout)
	res, err := script.Run(cctx, q.rdb, submitScript, "queue: submit", q.lay.common(), args...)
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
		default:
			rerr = fmt.Errorf("queue: submit: unexpected status %v", out[i])
		}
		answered := r.state.CompareAndSwap(reqTaken, reqAnswered)
		switch {
		case answered && rerr == nil:
			r.done <- nil
		case answered && err == nil:
			// Refused by the script: nothing was written.
			q.forget(r.f)
			r.done <- rerr
		case answered:
			// The call failed: the task may be queued. Its Submit fails,
			// so it must not run.
			r.done <- rerr
			q.withdraw(r.f)
		case rerr == nil || err != nil:
			// Its Submit gave up meanwhile, and the task may be queued.
			q.withdraw(r.f)
		default:
			q.forget(r.f)
		}
	}
}

// withdraw takes back the task of a failed Submit, retrying until Redis
// answers or the Queue closes; the id stays among the futures until then,
// so that a Submit of the same id waits for it (ErrDuplicateTask).
func (q *Queue) withdraw(f *Future) {
	started := q.withdrawals.Go(func() {
		defer q.forget(f)
		ctx := q.withdrawals.Context()
		for fails := 0; ; fails++ {
			cctx, cancel := context.WithTimeout(ctx, loopCallTimeout)
			res, err := script.Run(cctx, q.rdb, withdrawScript, "queue: withdraw a failed submit", q.lay.common(),
				q.lay.commonArgs(f.id, q.proc)...)
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
			select {
			case <-time.After(min(time.Duration(fails+1)*100*time.Millisecond, 2*time.Second)):
			case <-ctx.Done():
			}
		}
	})
	if !started {
		q.forget(f)
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
