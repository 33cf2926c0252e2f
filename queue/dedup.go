package queue

import (
	"errors"
	"fmt"
	"time"

	"github.com/shepherd-go/shepherd/internal/backoff"
)

// Duplicate tells whether Submit refused this task as a duplicate
// (WithDedup) and returned the first task's future: ID is then the first
// task's id, and the outcome is the first task's.
func (f *Future) Duplicate() bool { return f.duplicate }

// dedupWatchMax bounds the wait between two reads of the outcome of a
// duplicate's first task, when another process submitted it.
const dedupWatchMax = 500 * time.Millisecond

// duplicateOf returns a future of the task id, the first task of a
// deduplication key: it follows the future of this process when this
// process submitted it and waits for its outcome, else it reads the
// outcome from Redis until there is one (backing off to dedupWatchMax).
// It completes with ErrClosed when the Queue closes first, and with
// ErrTaskNotFound when the task is no longer kept (its retention ended
// within the deduplication window).
func (q *Queue) duplicateOf(id string) *Future {
	f := newFuture(q, id)
	f.duplicate = true
	f.submitted.Store(true)
	q.mu.Lock()
	first := q.futures[id]
	q.mu.Unlock()
	ctx := q.tasks.Context()
	q.tasks.Go(func() {
		if first != nil {
			select {
			case <-first.Done():
				f.complete(first.res, first.err)
			case <-ctx.Done():
				f.complete(nil, ErrClosed)
			}
			return
		}
		bo := backoff.Backoff{Min: 2 * time.Millisecond, Max: dedupWatchMax}
		for {
			res, err := q.Result(ctx, id)
			switch {
			case ctx.Err() != nil:
				f.complete(nil, ErrClosed)
				return
			case errors.Is(err, ErrTaskNotFound):
				f.complete(nil, fmt.Errorf("%w: %q, the first task of a deduplication key, is no longer kept", ErrTaskNotFound, id))
				return
			case err == nil || errors.As(err, new(*TaskError)):
				f.complete(res, err)
				return
			}
			if !backoff.Sleep(bo.Next(), ctx.Done()) {
				f.complete(nil, ErrClosed)
				return
			}
		}
	})
	return f
}
