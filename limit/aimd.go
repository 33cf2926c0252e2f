package limit

import (
	"math"
	"time"
)

// Defaults of AIMD.
const (
	DefaultAIMDInitial = 20
	DefaultAIMDMin     = 1
	DefaultAIMDMax     = 200
	DefaultAIMDBackoff = 0.9
	DefaultAIMDTimeout = 5 * time.Second
)

// AIMD is the additive-increase, multiplicative-decrease Algorithm of TCP
// Reno: a successful sample while the limiter is using at least half of its
// limit raises the limit by one; a drop, or an RTT above the timeout,
// multiplies it by the backoff ratio. The limit stays within [min, max].
//
// AIMD reacts only to drops, not to latency, so it keeps queues full until
// something fails; prefer Vegas or Gradient2 when latency matters.
type AIMD struct {
	limit, min, max int
	backoff         float64
	timeout         time.Duration
}

// AIMDOption configures an AIMD.
type AIMDOption func(*AIMD)

// WithAIMDInitial sets the starting limit. Defaults to DefaultAIMDInitial.
func WithAIMDInitial(n int) AIMDOption { return func(a *AIMD) { a.limit = n } }

// WithAIMDMin sets the lowest limit. Defaults to DefaultAIMDMin.
func WithAIMDMin(n int) AIMDOption { return func(a *AIMD) { a.min = n } }

// WithAIMDMax sets the highest limit. Defaults to DefaultAIMDMax.
func WithAIMDMax(n int) AIMDOption { return func(a *AIMD) { a.max = n } }

// WithAIMDBackoff sets the ratio, in (0, 1), the limit is multiplied by on
// a drop. Defaults to DefaultAIMDBackoff.
func WithAIMDBackoff(r float64) AIMDOption { return func(a *AIMD) { a.backoff = r } }

// WithAIMDTimeout sets the RTT above which a sample counts as a drop.
// Defaults to DefaultAIMDTimeout.
func WithAIMDTimeout(d time.Duration) AIMDOption { return func(a *AIMD) { a.timeout = d } }

// NewAIMD returns an AIMD algorithm. It returns an error wrapping
// ErrInvalidOption for bounds that do not satisfy 1 <= min <= initial <=
// max, a backoff outside (0, 1) or a timeout <= 0.
func NewAIMD(opts ...AIMDOption) (*AIMD, error) {
	a := &AIMD{
		limit: DefaultAIMDInitial, min: DefaultAIMDMin, max: DefaultAIMDMax,
		backoff: DefaultAIMDBackoff, timeout: DefaultAIMDTimeout,
	}
	for _, o := range opts {
		o(a)
	}
	if err := checkBounds(a.limit, a.min, a.max); err != nil {
		return nil, err
	}
	if !(a.backoff > 0 && a.backoff < 1) {
		return nil, invalidf("AIMD backoff must be in (0, 1), got %g", a.backoff)
	}
	if err := checkPositive("AIMD timeout", a.timeout); err != nil {
		return nil, err
	}
	return a, nil
}

// Update applies one sample and returns the new limit.
func (a *AIMD) Update(s Sample) int {
	switch {
	case s.Dropped || s.RTT > a.timeout:
		a.limit = int(math.Floor(float64(a.limit) * a.backoff))
	case s.InFlight*2 >= a.limit:
		// Growing while half the limit is idle would only raise a number
		// nobody tests; the limit would then be far too high when load
		// arrives.
		a.limit++
	}
	a.limit = min(a.max, max(a.min, a.limit))
	return a.limit
}

// Limit returns the current limit.
func (a *AIMD) Limit() int { return a.limit }
