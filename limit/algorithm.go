package limit

import (
	"math"
	"time"
)

// Sample is one observation fed to an Algorithm: how long one request took,
// how many requests were in flight when it started (itself included), and
// whether it was dropped (failed or timed out because of load).
type Sample struct {
	RTT      time.Duration
	InFlight int
	Dropped  bool
}

// Algorithm learns a concurrency limit from samples.
//
// Implementations are deterministic (time comes only from an injectable
// clock) and are not safe for concurrent use: the limiters of this package
// serialize calls to their Algorithm, and an Algorithm must not be shared
// by two limiters.
type Algorithm interface {
	// Update feeds one sample and returns the limit that results from it.
	Update(s Sample) int
	// Limit returns the current limit, at least 1.
	Limit() int
}

// log10Root is max(1, floor(log10(x))): the step by which Vegas moves and
// scales its thresholds, so that a limit of 1000 moves three times as fast
// as a limit of 20 but never slower than 1.
// It compares instead of calling math.Log10, which would be a tenth of the
// cost of an Acquire and Release.
func log10Root(x float64) float64 {
	r := 1.0
	for p := 100.0; x >= p && !math.IsInf(p, 1); p *= 10 {
		r++
	}
	return r
}

// clampF bounds v to [lo, hi].
func clampF(v, lo, hi float64) float64 {
	return math.Max(lo, math.Min(hi, v))
}

// checkBounds validates an algorithm's (initial, min, max) triple.
func checkBounds(initial, lo, hi int) error {
	if lo < 1 || hi < lo || initial < lo || initial > hi {
		return invalidf("need 1 <= min (%d) <= initial (%d) <= max (%d)", lo, initial, hi)
	}
	return nil
}
