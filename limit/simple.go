package limit

import (
	"context"
	"sync/atomic"
	"time"
)

// Simple is a Limiter with one in-flight gauge: a request is admitted while
// in-flight < limit, where the limit is what its Algorithm last returned.
//
// TryAcquire and Acquire are the same call (Simple never waits; wrap it in
// a Blocking to wait). Admission is one atomic compare-and-swap, so the
// in-flight count never exceeds the limit at admission time; a limit that
// shrinks below the in-flight count only stops new admissions. A release
// that feeds the algorithm takes a mutex. Safe for concurrent use.
type Simple struct {
	adaptive
	inFlight atomic.Int64
}

// NewSimple returns a Simple limiter driven by alg, which it then owns. It
// returns an error wrapping ErrInvalidOption for a nil alg, a nil clock or
// a Partitioned-only option.
func NewSimple(alg Algorithm, opts ...LimiterOption) (*Simple, error) {
	c := newLimiterConfig(opts)
	switch {
	case alg == nil:
		return nil, invalidf("algorithm is nil")
	case c.clockSet && c.now == nil:
		return nil, invalidf("clock is nil")
	case c.partitioned:
		return nil, invalidf("partition options need NewPartitioned")
	}
	s := &Simple{}
	s.init(alg, clock{now: c.now})
	return s, nil
}

// Acquire is TryAcquire: Simple never waits.
func (s *Simple) Acquire(ctx context.Context) (Token, error) { return s.TryAcquire(ctx) }

// TryAcquire admits a request if in-flight < limit and ctx is not done.
func (s *Simple) TryAcquire(ctx context.Context) (Token, error) {
	if err := ctx.Err(); err != nil {
		return Token{}, err
	}
	for {
		n := s.inFlight.Load()
		if n >= s.limit.Load() {
			return Token{}, ErrLimitExceeded
		}
		if s.inFlight.CompareAndSwap(n, n+1) {
			var start time.Duration
			if !s.fixed { // a Fixed limit needs no RTT: spare the clock read
				start = s.clock.read()
			}
			return newToken(s, held{start: start, inFlight: int(n + 1)}), nil
		}
	}
}

func (s *Simple) release(h held, o outcome) {
	// Update before freeing the slot, so that a waiter woken by the
	// release sees the limit this sample produced.
	s.update(h, o)
	s.inFlight.Add(-1)
}

// Limit returns the current limit.
func (s *Simple) Limit() int { return int(s.limit.Load()) }

// InFlight returns the number of admitted requests not yet released.
func (s *Simple) InFlight() int { return int(s.inFlight.Load()) }
