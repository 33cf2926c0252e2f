package limit

import "errors"

var (
	// ErrInvalidOption is wrapped by every constructor error caused by an
	// option value out of range.
	ErrInvalidOption = errors.New("limit: invalid option")

	// ErrLimitExceeded is returned when a request is rejected because the
	// in-flight count has reached the limit (or, for Blocking, because the
	// wait timed out). Callers should shed the request, for example with
	// HTTP 429.
	ErrLimitExceeded = errors.New("limit: limit exceeded")

	// ErrClosed is returned by an AdaptiveExecutor after Close or Shutdown.
	ErrClosed = errors.New("limit: executor closed")

	// ErrDropped may be returned (wrapped) by a task of an AdaptiveExecutor
	// to report that the work was dropped or timed out because of load, so
	// that the limit backs off.
	ErrDropped = errors.New("limit: request dropped")

	// ErrTaskPanicked wraps the value of a panic recovered from a task of an
	// AdaptiveExecutor.
	ErrTaskPanicked = errors.New("limit: task panicked")
)
