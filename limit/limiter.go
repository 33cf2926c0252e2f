package limit

import "context"

// Limiter admits requests up to a concurrency limit.
//
// All implementations in this package are safe for concurrent use.
type Limiter interface {
	// Acquire admits a request or returns an error: ErrLimitExceeded when
	// the limit is reached (a blocking limiter first waits), or ctx's error.
	// On success the caller must report the outcome on the Token.
	Acquire(ctx context.Context) (Token, error)
	// TryAcquire is Acquire without any waiting: it returns
	// ErrLimitExceeded at once when in-flight >= limit.
	TryAcquire(ctx context.Context) (Token, error)
	// Limit returns the current limit.
	Limit() int
	// InFlight returns the number of admitted requests not yet released.
	InFlight() int
}
