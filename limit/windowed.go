package limit

import (
	"math"
	"math/rand/v2"
	"slices"
	"time"
)

// Defaults of Windowed.
const (
	DefaultWindowMin        = 100 * time.Millisecond
	DefaultWindowMax        = time.Second
	DefaultWindowMinSamples = 10
	DefaultWindowMaxSamples = 1000
	DefaultWindowPercentile = 0.0 // the window's minimum RTT
)

// Windowed wraps an Algorithm so that it is fed one aggregated sample per
// window instead of every sample, which removes per-request noise and makes
// the wrapped algorithm's cost independent of the request rate.
//
// A window opens at its first sample. It closes at the first sample that
// arrives once the window is at least its length long and holds at least
// min-samples samples, or once it is max long. Its length is twice the
// previous window's minimum RTT, bounded to [min, max]: an algorithm that
// moves the limit once per window then sees the effect of its last move
// before it moves again, which is what keeps it from overshooting. A window that closes with
// fewer than min-samples samples is discarded (too little to judge by). The
// aggregate carries the window's RTT at the configured percentile (0 means
// the minimum), its highest in-flight count and whether any sample was
// dropped. At most max-samples RTTs are kept per window (a uniform
// reservoir), which bounds memory at any request rate.
type Windowed struct {
	inner                  Algorithm
	minWindow, maxWindow   time.Duration
	minSamples, maxSamples int
	percentile             float64
	clock                  clock
	clockSet               bool
	rng                    *rand.Rand

	length   time.Duration
	start    time.Duration // clock reading
	count    int
	minRTT   time.Duration
	rtts     []time.Duration
	inFlight int
	dropped  bool
}

// WindowedOption configures a Windowed.
type WindowedOption func(*Windowed)

// WithWindowBounds sets the shortest and the longest window. Default to
// DefaultWindowMin and DefaultWindowMax.
func WithWindowBounds(lo, hi time.Duration) WindowedOption {
	return func(w *Windowed) { w.minWindow, w.maxWindow = lo, hi }
}

// WithWindowMinSamples sets how many samples a window needs to count.
// Defaults to DefaultWindowMinSamples.
func WithWindowMinSamples(n int) WindowedOption { return func(w *Windowed) { w.minSamples = n } }

// WithWindowMaxSamples sets how many RTTs a window keeps for its
// percentile. Defaults to DefaultWindowMaxSamples.
func WithWindowMaxSamples(n int) WindowedOption { return func(w *Windowed) { w.maxSamples = n } }

// WithWindowPercentile sets which RTT of the window is fed on: p in [0, 1),
// 0 for the minimum, 0.99 for p99. Defaults to DefaultWindowPercentile.
func WithWindowPercentile(p float64) WindowedOption { return func(w *Windowed) { w.percentile = p } }

// WithWindowClock sets the clock that measures windows. Defaults to the
// monotonic clock of time.Now.
func WithWindowClock(now func() time.Time) WindowedOption {
	return func(w *Windowed) { w.clock.now, w.clockSet = now, true }
}

// NewWindowed returns inner wrapped in windows. It returns an error
// wrapping ErrInvalidOption for a nil inner, bounds not satisfying 0 < min
// <= max, min-samples < 1, max-samples < min-samples, a percentile outside
// [0, 1) or a nil clock.
func NewWindowed(inner Algorithm, opts ...WindowedOption) (*Windowed, error) {
	w := &Windowed{
		inner: inner, minWindow: DefaultWindowMin, maxWindow: DefaultWindowMax,
		minSamples: DefaultWindowMinSamples, maxSamples: DefaultWindowMaxSamples,
		percentile: DefaultWindowPercentile,
		// A fixed seed keeps the reservoir, and so the limits, reproducible.
		rng: rand.New(rand.NewPCG(1, 2)),
	}
	for _, o := range opts {
		o(w)
	}
	switch {
	case inner == nil:
		return nil, invalidf("Windowed inner algorithm is nil")
	case w.minWindow <= 0 || w.maxWindow < w.minWindow:
		return nil, invalidf("Windowed needs 0 < min (%v) <= max (%v)", w.minWindow, w.maxWindow)
	case w.minSamples < 1 || w.maxSamples < w.minSamples:
		return nil, invalidf("Windowed needs 1 <= min samples (%d) <= max samples (%d)",
			w.minSamples, w.maxSamples)
	case !(w.percentile >= 0 && w.percentile < 1):
		return nil, invalidf("Windowed percentile must be in [0, 1), got %g", w.percentile)
	case w.clockSet && w.clock.now == nil:
		return nil, invalidf("Windowed clock is nil")
	}
	w.rtts = make([]time.Duration, 0, min(w.maxSamples, 64))
	w.length = w.minWindow
	return w, nil
}

// Update adds s to the current window and, when that closes the window,
// feeds the aggregate to the wrapped algorithm. It returns the (possibly
// unchanged) limit.
func (w *Windowed) Update(s Sample) int {
	now := w.clock.read()
	if w.count == 0 {
		w.start = now
	}
	w.add(s)
	elapsed := now - w.start
	if elapsed >= w.maxWindow || (elapsed >= w.length && w.count >= w.minSamples) {
		if w.count >= w.minSamples {
			w.length = min(w.maxWindow, max(w.minWindow, 2*w.minRTT))
			w.inner.Update(Sample{RTT: w.aggregate(), InFlight: w.inFlight, Dropped: w.dropped})
		}
		w.reset()
	}
	return w.inner.Limit()
}

// Limit returns the wrapped algorithm's limit.
func (w *Windowed) Limit() int { return w.inner.Limit() }

func (w *Windowed) add(s Sample) {
	w.count++
	w.inFlight = max(w.inFlight, s.InFlight)
	w.dropped = w.dropped || s.Dropped
	if s.RTT <= 0 {
		return
	}
	if w.minRTT == 0 || s.RTT < w.minRTT {
		w.minRTT = s.RTT
	}
	if len(w.rtts) < w.maxSamples {
		w.rtts = append(w.rtts, s.RTT)
	} else if i := w.rng.IntN(w.count); i < w.maxSamples {
		w.rtts[i] = s.RTT
	}
}

func (w *Windowed) aggregate() time.Duration {
	if w.percentile == 0 || len(w.rtts) == 0 {
		return w.minRTT
	}
	slices.Sort(w.rtts)
	i := int(math.Ceil(w.percentile*float64(len(w.rtts)))) - 1
	return w.rtts[max(0, i)]
}

func (w *Windowed) reset() {
	w.count, w.minRTT, w.inFlight, w.dropped = 0, 0, 0, false
	w.rtts = w.rtts[:0]
}
