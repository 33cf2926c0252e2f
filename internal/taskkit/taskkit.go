// Package taskkit is the seam through which package shepherdtest runs a
// queue handler with a real *queue.Task and no Redis. Package queue
// registers Run when it is initialised (queue/testkit.go), so that the
// queue's public API does not grow for tests' sake; shepherdtest imports
// queue, which guarantees Run is set before it is called. Nothing else
// should call it.
package taskkit

import (
	"context"
	"time"
)

// Spec is the task a handler gets and the limits a serving process would
// apply to its attempt.
type Spec struct {
	ID          string
	Payload     []byte
	Attempt     int
	MaxAttempts int
	Tenant      string
	// Timeout is the attempt's timeout: the handler's ctx ends after it.
	Timeout time.Duration
	// MaxResultSize is the queue's MaxPayloadSize: a longer result fails
	// the task at once, as a serving process would.
	MaxResultSize int
	// Progress receives each Task.Progress call whose value and message
	// passed the queue's checks; its error is the call's.
	Progress func(ctx context.Context, value float64, message string) error
}

// Ended is how the attempt ended and what a serving process would do next.
type Ended struct {
	Result   []byte
	Err      error // the handler's error, its panic's, or the late result's
	Panicked bool
	Stack    string // the panic's stack, trimmed as the queue stores it
	TimedOut bool   // the handler returned at or after its deadline
	// Kind is what the queue would record: "ok", "fail" (retried while
	// attempts remain, else dead), "perm" (dead at once) or "later".
	Kind  string
	Delay time.Duration // RetryLater's delay, for "later"
}

// Run runs handler, a queue.Handler, on the task s describes, as a
// serving process's worker runs an attempt. Package queue sets it.
var Run func(ctx context.Context, handler any, s Spec) Ended
