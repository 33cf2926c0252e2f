package queue

import (
	"errors"
	"fmt"
	"strings"
	"time"
)

// Sentinel errors. Callers branch on them with errors.Is.
var (
	// ErrInvalidOption wraps every refusal of bad input: an option out of
	// range, an empty queue name, a nil client or handler.
	ErrInvalidOption = errors.New("queue: invalid option")
	// ErrQueueFull is returned by Submit when the queue holds
	// MaxQueued unfinished tasks. Nothing is written; tasks are never
	// trimmed to make room.
	ErrQueueFull = errors.New("queue: queue full")
	// ErrDuplicateTask is returned by Submit for a task id that the queue
	// still knows (unfinished, a dead letter, or an outcome kept for its
	// retention).
	ErrDuplicateTask = errors.New("queue: duplicate task id")
	// ErrPayloadTooLarge is returned by Submit for a payload over
	// MaxPayloadSize; a handler's result over it fails the attempt with it.
	ErrPayloadTooLarge = errors.New("queue: payload too large")
	// ErrTaskNotFound is returned for a task id the queue does not know:
	// never submitted, or its outcome's retention is over.
	ErrTaskNotFound = errors.New("queue: task not found")
	// ErrNotFinished is returned by Result for a task that has no outcome
	// yet.
	ErrNotFinished = errors.New("queue: task not finished")
	// ErrClosed is returned by calls on a closed Queue, and by Wait when
	// the Queue that made the future was closed first (the outcome can
	// still be read with Result).
	ErrClosed = errors.New("queue: closed")
	// ErrNotReplicated is returned by Submit (and a Batch's) with
	// WithReplicas when fewer replicas than asked acknowledged the call's
	// writes within the timeout (or the master has fewer replicas
	// connected): the task is withdrawn, as after any failed Submit.
	// Result returns it, with WithReplicas, for an outcome not yet
	// confirmed on the replicas; Wait waits instead.
	ErrNotReplicated = errors.New("queue: not replicated")
	// ErrAlreadyServing is returned by Serve on a Queue that serves
	// already.
	ErrAlreadyServing = errors.New("queue: already serving")
	// ErrBatchFailed is returned by Batch.Submit once its fail-fast batch
	// has failed: the task is not queued.
	ErrBatchFailed = errors.New("queue: batch failed")
	// ErrBatchNotFound is returned by WaitBatch for a batch the queue
	// does not know: no task was submitted to it, or its retention is
	// over.
	ErrBatchNotFound = errors.New("queue: batch not found")
	// ErrQueueNotFound is returned by Client.Drain and Client.Reshard
	// for a queue that Redis does not hold (see Client.Exists).
	ErrQueueNotFound = errors.New("queue: queue not found")
	// ErrStopped is returned by Server.SetMode once the server is
	// stopping or stopped.
	ErrStopped = errors.New("queue: server stopped")
	// ErrRedisTimeout is returned by Submit (and Close) when Redis did
	// not answer its call within WithCallTimeout (or the client's own
	// read or write timeout, if shorter). It does not match
	// context.DeadlineExceeded: the caller's ctx did not end. A
	// Submit's task is not queued: it is withdrawn in the background
	// (see Submit).
	ErrRedisTimeout = errors.New("queue: redis did not answer in time")
	// ErrOutcomeLost is returned by Wait when the task disappeared from
	// Redis without an outcome (Redis restarted empty, or the key was
	// deleted by hand).
	ErrOutcomeLost = errors.New("queue: task lost without an outcome")

	// ErrUnknownTenant is returned by Submit, Replay and Acquire for a
	// tenant that is not registered (SetTenant), and by the tenant calls
	// for one that is not. Nothing is written: a made-up tenant id
	// creates no state and takes no capacity.
	ErrUnknownTenant = errors.New("queue: unknown tenant")
	// ErrTenantBusy is returned by Acquire when the tenant stayed at its
	// capacity for the whole wait (WithAcquireWait).
	ErrTenantBusy = errors.New("queue: tenant at capacity")

	// ErrFailed matches (errors.Is) every *TaskError of a task that
	// failed finally: a dead letter.
	ErrFailed = errors.New("queue: task failed")
	// ErrCancelled matches (errors.Is) the *TaskError of a cancelled task.
	ErrCancelled = errors.New("queue: task cancelled")
)

// AttemptError is what one attempt of a task failed with.
type AttemptError struct {
	Attempt int       // 1 for the first attempt
	Err     string    // the handler's error text, or why the attempt ended; "panic: VALUE" (one line) for a panic
	At      time.Time // by Redis's clock
	// Stack is the goroutine's stack when the handler panicked, from the
	// panicking frame down, cut to at most 4 KiB; "" for an attempt that
	// did not panic. A task keeps the stack of its latest panic only:
	// Stack is "" on the earlier attempts that panicked.
	Stack string
}

// TaskError is the final error of a task that failed or was cancelled:
// Wait and Result return it. It matches ErrFailed or ErrCancelled with
// errors.Is.
type TaskError struct {
	ID        string
	Cancelled bool           // cancelled, not failed
	Attempts  []AttemptError // every failed attempt, oldest first
}

func (e *TaskError) Error() string {
	var b strings.Builder
	if e.Cancelled {
		fmt.Fprintf(&b, "queue: task %s cancelled", e.ID)
	} else {
		fmt.Fprintf(&b, "queue: task %s failed", e.ID)
	}
	if n := len(e.Attempts); n > 0 {
		last := e.Attempts[n-1]
		fmt.Fprintf(&b, " after %d attempt(s): attempt %d: %s", n, last.Attempt, last.Err)
	}
	return b.String()
}

// Is makes errors.Is(err, ErrFailed) and errors.Is(err, ErrCancelled)
// work.
func (e *TaskError) Is(target error) bool {
	if e.Cancelled {
		return target == ErrCancelled
	}
	return target == ErrFailed
}

// Permanent wraps err so that the attempt fails the task at once, without
// retries: the task becomes a dead letter. Permanent(nil) is nil.
func Permanent(err error) error {
	if err == nil {
		return nil
	}
	return &permanentError{err}
}

type permanentError struct{ err error }

func (e *permanentError) Error() string { return e.err.Error() }
func (e *permanentError) Unwrap() error { return e.err }

// RetryLater wraps err so that the task runs again after d without using
// an attempt: for a downstream that is down, not for a failure of the
// task. A d below 1ms is taken as 1ms. RetryLater(d, nil) is nil.
func RetryLater(d time.Duration, err error) error {
	if err == nil {
		return nil
	}
	return &laterError{d: d, err: err}
}

type laterError struct {
	d   time.Duration
	err error
}

func (e *laterError) Error() string { return e.err.Error() }
func (e *laterError) Unwrap() error { return e.err }
