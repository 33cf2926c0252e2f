package queue

import (
	"context"
	"fmt"
	"time"

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

// forget stops waiting for f's outcome (its Submit failed).
func (q *Queue) forget(f *Future) {
	q.mu.Lock()
	if q.futures[f.id] == f {
		delete(q.futures, f.id)
	}
	q.mu.Unlock()
}

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
