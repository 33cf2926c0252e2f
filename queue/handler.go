package queue

import (
	"context"
	"time"

	"github.com/shepherd-go/shepherd/limit"
)

// Task is what a handler gets.
type Task struct {
	ID          string
	Payload     []byte
	Attempt     int // 1 for the first attempt
	MaxAttempts int
	Tenant      string // WithTenant's, "" for none

	timeout time.Duration
	trace   string      // the Submit's span context (trace.go), "" when not traced
	q       *Queue      // the queue that gave it (Progress)
	tok     limit.Token // its permit of the server's concurrency limit
	shard   int         // the shard it was taken from

	// report takes Progress calls instead of Redis when the test kit
	// runs the task (testkit.go); nil when a Server gave it.
	report func(ctx context.Context, value float64, message string) error
}

// Handler runs a task and returns its result (at most MaxPayloadSize
// bytes). An error fails the attempt: the task is retried after a backoff
// until its max attempts, then becomes a dead letter; wrap the error with
// Permanent to fail it at once, or with RetryLater to run it again later
// without using an attempt. A panic fails the attempt like an error:
// its error is one line, "panic: VALUE", and its stack is kept apart
// (AttemptError.Stack). The ctx ends at the attempt's timeout, when the
// task is cancelled, and on a hard stop; a handler must return soon
// after. A result returned after the timeout is dropped: the attempt has
// failed (see WithTimeout).
type Handler func(ctx context.Context, t *Task) ([]byte, error)

// ResourceHandler is a Handler that gets its worker's resource.
type ResourceHandler[R any] func(ctx context.Context, res R, t *Task) ([]byte, error)

// Resource is what each worker owns: Open makes it when the worker
// starts (worker is 0 to Workers-1), Close releases it when the worker
// stops. After a handler panics or overruns its timeout, the worker
// resets its resource (Close, then Open) before its next task. A failed
// Open is retried with a backoff (up to 5s) and logged; the worker takes
// no task until it succeeds. Close may be nil.
type Resource[R any] struct {
	Open  func(ctx context.Context, worker int) (R, error)
	Close func(R)
}

// slot is a worker's resource and handler, whatever the resource's type.
type slot interface {
	open(ctx context.Context) error
	close()
	handle(ctx context.Context, t *Task) ([]byte, error)
}

type resourceSlot[R any] struct {
	idx    int
	res    Resource[R]
	h      ResourceHandler[R]
	r      R
	isOpen bool
}

func (s *resourceSlot[R]) open(ctx context.Context) error {
	if s.isOpen {
		return nil
	}
	if s.res.Open != nil {
		r, err := s.res.Open(ctx, s.idx)
		if err != nil {
			return err
		}
		s.r = r
	}
	s.isOpen = true
	return nil
}

func (s *resourceSlot[R]) close() {
	if !s.isOpen {
		return
	}
	s.isOpen = false
	if s.res.Close != nil {
		s.res.Close(s.r)
	}
	var zero R
	s.r = zero
}

func (s *resourceSlot[R]) handle(ctx context.Context, t *Task) ([]byte, error) {
	return s.h(ctx, s.r, t)
}
