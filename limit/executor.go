package limit

import (
	"context"
	"errors"
	"fmt"
	"sync"
)

// AdaptiveExecutor runs func(ctx) error tasks, each in its own goroutine,
// with at most as many running as its Limiter admits: as the limit adapts,
// so does the concurrency. Submit blocks while the limiter is full.
//
// A task's result is its outcome: nil is a success (its RTT feeds the
// limit), an error matching ErrDropped or context.DeadlineExceeded is a
// drop (the limit backs off), and any other error, or a panic, releases the
// slot without feeding the limit. Task errors go to the error handler, or
// else the first is kept for Close and Shutdown to return.
//
// The executor owns its task goroutines: Shutdown waits for them, Close
// cancels their context and waits. Both are idempotent. Safe for
// concurrent use.
type AdaptiveExecutor struct {
	lim     Limiter
	handler func(error)

	taskCtx    context.Context // passed to tasks; cancelled by Close
	cancelTask context.CancelFunc
	closing    context.Context // done once no more Submit is accepted
	stopAccept context.CancelFunc

	mu       sync.Mutex
	closed   bool
	firstErr error
	errCount int
	wg       sync.WaitGroup // Submit calls in progress and running tasks
}

// ExecutorOption configures an AdaptiveExecutor.
type ExecutorOption func(*AdaptiveExecutor)

// WithErrorHandler sets a function called, from the task's goroutine, with
// every error a task returns (panics arrive wrapping ErrTaskPanicked).
// Defaults to keeping the first error for Close and Shutdown.
func WithErrorHandler(f func(error)) ExecutorOption {
	return func(e *AdaptiveExecutor) { e.handler = f }
}

// NewAdaptiveExecutor returns an executor admitting tasks through l. If l
// is not a *Blocking it is wrapped in one without timeout, so Submit waits
// until a slot frees or its ctx ends; pass a Blocking to bound the wait.
// It returns an error wrapping ErrInvalidOption for a nil l.
func NewAdaptiveExecutor(l Limiter, opts ...ExecutorOption) (*AdaptiveExecutor, error) {
	if l == nil {
		return nil, invalidf("executor limiter is nil")
	}
	if _, ok := l.(*Blocking); !ok {
		b, err := NewBlocking(l, WithBlockingTimeout(0))
		if err != nil {
			return nil, err
		}
		l = b
	}
	e := &AdaptiveExecutor{lim: l}
	for _, o := range opts {
		o(e)
	}
	e.taskCtx, e.cancelTask = context.WithCancel(context.Background())
	e.closing, e.stopAccept = context.WithCancel(context.Background())
	return e, nil
}

// Submit waits for a slot and starts task in a new goroutine. It returns
// ErrClosed after Close or Shutdown (also while waiting), ctx's error if
// ctx ends first, or ErrLimitExceeded if a Blocking limiter timed out. The
// task gets the executor's context, not ctx, since it outlives Submit.
func (e *AdaptiveExecutor) Submit(ctx context.Context, task func(ctx context.Context) error) error {
	e.mu.Lock()
	if e.closed {
		e.mu.Unlock()
		return ErrClosed
	}
	e.wg.Add(1)
	e.mu.Unlock()

	actx, cancel := context.WithCancel(ctx)
	stop := context.AfterFunc(e.closing, cancel)
	t, err := e.lim.Acquire(actx)
	stop()
	cancel()
	if err != nil {
		e.wg.Done()
		if e.closing.Err() != nil && ctx.Err() == nil {
			return ErrClosed
		}
		return err
	}
	go e.run(t, task)
	return nil
}

func (e *AdaptiveExecutor) run(t Token, task func(context.Context) error) {
	defer e.wg.Done()
	err := func() (err error) {
		defer func() {
			if r := recover(); r != nil {
				err = fmt.Errorf("%w: %v", ErrTaskPanicked, r)
			}
		}()
		return task(e.taskCtx)
	}()
	switch {
	case err == nil:
		t.Success()
		return
	case errors.Is(err, ErrDropped) || errors.Is(err, context.DeadlineExceeded):
		t.Dropped()
	default:
		t.Ignore()
	}
	if e.handler != nil {
		e.handler(err)
		return
	}
	e.mu.Lock()
	if e.firstErr == nil {
		e.firstErr = err
	}
	e.errCount++
	e.mu.Unlock()
}

// Shutdown stops accepting tasks and waits for the running ones to end. If
// ctx ends first it cancels the tasks' context, waits for them all the
// same, and returns ctx's error joined with the task error. Idempotent.
func (e *AdaptiveExecutor) Shutdown(ctx context.Context) error {
	e.beginClose()
	done := make(chan struct{})
	go func() {
		e.wg.Wait()
		close(done)
	}()
	select {
	case <-done:
		e.cancelTask() // releases the context's resources
		return e.taskErr()
	case <-ctx.Done():
		e.cancelTask()
		<-done
		return errors.Join(ctx.Err(), e.taskErr())
	}
}

// Close stops accepting tasks, cancels the running tasks' context and
// waits for them to return. It returns the first task error (with a count
// of the others), or nil. Idempotent.
func (e *AdaptiveExecutor) Close() error {
	e.beginClose()
	e.cancelTask()
	e.wg.Wait()
	return e.taskErr()
}

func (e *AdaptiveExecutor) beginClose() {
	e.mu.Lock()
	e.closed = true
	e.mu.Unlock()
	e.stopAccept()
}

func (e *AdaptiveExecutor) taskErr() error {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.errCount > 1 {
		return fmt.Errorf("%w (and %d more task errors)", e.firstErr, e.errCount-1)
	}
	return e.firstErr
}

// Limiter returns the limiter the executor admits tasks through.
func (e *AdaptiveExecutor) Limiter() Limiter { return e.lim }
