package shepherdtest

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/shepherd-go/shepherd/internal/taskkit"
	"github.com/shepherd-go/shepherd/queue"
)

// TaskOption sets what the task RunTask gives the handler carries.
type TaskOption func(*taskConfig)

type taskConfig struct{ spec taskkit.Spec }

// WithTaskID sets Task.ID. Defaults to "task-1".
func WithTaskID(id string) TaskOption { return func(c *taskConfig) { c.spec.ID = id } }

// WithAttempt sets Task.Attempt, to run the handler as a retry would
// (n is 1 for the first attempt); it panics for n < 1. Defaults to 1.
func WithAttempt(n int) TaskOption {
	if n < 1 {
		panic(fmt.Sprintf("shepherdtest: WithAttempt(%d): the first attempt is 1", n))
	}
	return func(c *taskConfig) { c.spec.Attempt = n }
}

// WithMaxAttempts sets Task.MaxAttempts, as queue.WithMaxAttempts does;
// it panics for n < 1. Defaults to queue.DefaultMaxAttempts.
func WithMaxAttempts(n int) TaskOption {
	if n < 1 {
		panic(fmt.Sprintf("shepherdtest: WithMaxAttempts(%d): a task has at least 1 attempt", n))
	}
	return func(c *taskConfig) { c.spec.MaxAttempts = n }
}

// WithTenant sets Task.Tenant, as queue.WithTenant does. Defaults to
// none ("").
func WithTenant(id string) TaskOption { return func(c *taskConfig) { c.spec.Tenant = id } }

// WithTimeout sets the attempt's timeout, as queue.WithTimeout does: the
// handler's ctx ends after d, and a result returned after it is dropped.
// It panics for d <= 0. Defaults to queue.DefaultTimeout.
func WithTimeout(d time.Duration) TaskOption {
	if d <= 0 {
		panic(fmt.Sprintf("shepherdtest: WithTimeout(%v): the timeout must be positive", d))
	}
	return func(c *taskConfig) { c.spec.Timeout = d }
}

// WithMaxResultSize sets the queue's MaxPayloadSize, which bounds the
// handler's result (queue.WithMaxPayloadSize). Defaults to
// queue.DefaultMaxPayloadSize.
func WithMaxResultSize(n int) TaskOption { return func(c *taskConfig) { c.spec.MaxResultSize = n } }

// Outcome is what a serving process would do with a task after an
// attempt.
type Outcome string

// The outcomes of an attempt.
const (
	// OutcomeDone: the handler succeeded; its result is the task's.
	OutcomeDone Outcome = "done"
	// OutcomeRetry: the attempt failed and attempts remain; the task runs
	// again after a backoff.
	OutcomeRetry Outcome = "retry"
	// OutcomeLater: the handler returned queue.RetryLater; the task runs
	// again after TaskRun.RetryIn without using an attempt.
	OutcomeLater Outcome = "later"
	// OutcomeDead: the attempt failed finally (a queue.Permanent error,
	// the last attempt, or a result over the maximum size); the task
	// becomes a dead letter.
	OutcomeDead Outcome = "dead"
)

// TaskRun is what RunTask saw of one attempt.
type TaskRun struct {
	// Result is the handler's result; nil unless Outcome is OutcomeDone.
	Result []byte
	// Err is the handler's error as it returned it (errors.Is and As
	// work on it), nil when it succeeded. A panic's is "panic: VALUE"; a
	// result returned after the timeout is dropped and Err says so; a
	// result over the maximum size wraps queue.ErrPayloadTooLarge.
	Err error
	// Panicked tells whether the handler panicked; Stack is then its
	// stack, trimmed as the queue stores it (queue.AttemptError.Stack).
	Panicked bool
	Stack    string
	// TimedOut tells whether the handler returned at or after the
	// attempt's deadline.
	TimedOut bool
	// Progress lists the handler's Task.Progress calls that succeeded, in
	// order, each with the attempt and the time (this process's clock).
	Progress []queue.Progress
	// Outcome is what a serving process would do next, and RetryIn the
	// delay of OutcomeLater.
	Outcome Outcome
	RetryIn time.Duration
}

// RunTask runs handler once on a task of payload, as a serving process's
// worker runs an attempt, without Redis: the handler gets a real
// *queue.Task (ID, Payload, Attempt, MaxAttempts and Tenant set by opts)
// and a ctx that ends at the attempt's timeout or when ctx ends. A panic
// is recovered and becomes the attempt's error; Task.Progress records
// into the returned TaskRun instead of Redis, after the checks it makes
// on a queue (a NaN value or a message over queue.MaxProgressMessage
// returns queue.ErrInvalidOption, as it would), and returns ctx's error
// once the handler's ctx has ended. RunTask waits for the handler to
// return, however late, as a worker does.
func RunTask(ctx context.Context, handler queue.Handler, payload []byte, opts ...TaskOption) TaskRun {
	if handler == nil {
		panic("shepherdtest: RunTask with a nil handler")
	}
	cfg := taskConfig{taskkit.Spec{ID: "task-1", Payload: payload, Attempt: 1, MaxAttempts: queue.DefaultMaxAttempts,
		Timeout: queue.DefaultTimeout, MaxResultSize: queue.DefaultMaxPayloadSize}}
	for _, o := range opts {
		o(&cfg)
	}
	spec := cfg.spec
	var mu sync.Mutex
	var reports []queue.Progress
	spec.Progress = func(ctx context.Context, value float64, message string) error {
		if err := ctx.Err(); err != nil {
			return err
		}
		mu.Lock()
		defer mu.Unlock()
		reports = append(reports, queue.Progress{Value: value, Message: message, Attempt: spec.Attempt, At: time.Now()})
		return nil
	}
	e := taskkit.Run(ctx, handler, spec)
	mu.Lock()
	defer mu.Unlock()
	run := TaskRun{Result: e.Result, Err: e.Err, Panicked: e.Panicked, Stack: e.Stack, TimedOut: e.TimedOut,
		Progress: reports, RetryIn: e.Delay}
	switch e.Kind {
	case "ok":
		run.Outcome = OutcomeDone
	case "later":
		run.Outcome = OutcomeLater
	case "perm":
		run.Outcome = OutcomeDead
	default:
		run.Outcome = OutcomeRetry
		if spec.Attempt >= spec.MaxAttempts {
			run.Outcome = OutcomeDead
		}
	}
	return run
}

// RunTaskWith is RunTask for a handler with a resource (queue.ServeWith):
// the handler gets res, which the caller opens and closes.
func RunTaskWith[R any](ctx context.Context, res R, handler queue.ResourceHandler[R], payload []byte, opts ...TaskOption) TaskRun {
	if handler == nil {
		panic("shepherdtest: RunTaskWith with a nil handler")
	}
	return RunTask(ctx, func(ctx context.Context, t *queue.Task) ([]byte, error) { return handler(ctx, res, t) }, payload, opts...)
}
