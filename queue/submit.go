package queue

import (
	"context"
	"fmt"
	"time"

	"github.com/shepherd-go/shepherd/internal/script"
)

// Submit queues a task with payload (which may be empty) and returns once
// it is durably queued (as durable as the Redis's persistence), with a
// future of its outcome. Tasks must be idempotent: an attempt interrupted
// by a crash, a pause longer than the TTL or a lost reply runs again.
//
// Errors: ErrInvalidOption (a bad option), ErrPayloadTooLarge,
// ErrDuplicateTask (WithTaskID of a task the queue still knows),
// ErrQueueFull, ErrClosed, or the Redis or ctx error of the call; with
// any error, the task is not queued, except after a Redis or ctx error
// that hit the call after Redis received it: then the outcome is
// unknown, and a Submit retried with the same WithTaskID tells
// (ErrDuplicateTask means the first one went through).
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
	res, err := script.Run(ctx, q.rdb, submitScript, "queue: submit", q.lay.common(q.lay.task(id)),
		q.lay.commonArgs(id, payload, sc.maxAttempts, sc.timeout.Milliseconds(), delay.Milliseconds(),
			q.proc, sc.retention.Milliseconds(), q.cfg.maxQueued)...)
	if err == nil && res != "OK" {
		switch res {
		case "DUP":
			err = fmt.Errorf("%w: %q", ErrDuplicateTask, id)
		case "FULL":
			err = fmt.Errorf("%w: %d unfinished tasks", ErrQueueFull, q.cfg.maxQueued)
		default:
			err = fmt.Errorf("queue: submit: unexpected reply %v", res)
		}
	}
	if err != nil {
		q.forget(f)
		return nil, err
	}
	f.submitted.Store(true)
	q.m.submitted.Add(ctx, 1, q.m.attrs)
	q.m.submitDuration.Record(ctx, time.Since(start).Seconds(), q.m.attrs)
	return f, nil
}

func (q *Queue) forget(f *Future) {
	q.mu.Lock()
	if q.futures[f.id] == f {
		delete(q.futures, f.id)
	}
	q.mu.Unlock()
}
