package limit

import (
	"math"
	"time"
)

// Defaults of Gradient2.
const (
	DefaultGradient2Initial           = 20
	DefaultGradient2Min               = 1
	DefaultGradient2Max               = 1000
	DefaultGradient2Smoothing         = 0.5
	DefaultGradient2Tolerance         = 1.0
	DefaultGradient2ShortWindow       = 10
	DefaultGradient2LongWindow        = 600
	DefaultGradient2LongDamping       = 0.01
	DefaultGradient2DivergenceRatio   = 2.0
	DefaultGradient2DivergenceSamples = 20
	DefaultGradient2Cut               = 0.5
)

// DefaultGradient2Headroom is the default queue headroom of Gradient2:
// max(2×max(1, floor(log10(limit))), sqrt(limit)/2) requests, small enough
// that a limit of 10 does not queue a third of its requests and large
// enough to keep growing at a limit of 1000.
func DefaultGradient2Headroom(limit float64) float64 {
	return max(2*log10Root(limit), math.Sqrt(limit)/2)
}

// Gradient2 is a delay-gradient Algorithm. It keeps a short and a long
// exponential average of the RTT; their ratio says whether a queue is
// building:
//
//	gradient = clamp(tolerance × long/short, 0.5, 1)
//	next     = limit × gradient + headroom(limit)
//	limit    = (1−smoothing)×limit + smoothing×next
//
// At a steady RTT the gradient is 1 and the limit grows by the headroom;
// once a queue builds, the limit settles where limit×gradient + headroom =
// limit, that is about headroom requests above the service's capacity.
//
// Two guards keep it honest under long overload. The long average moves up
// only at a fraction (the long damping) of its normal rate while the short
// one is above it, so it cannot follow a queue it is meant to measure
// against; and when the short average stays above the long one by the
// divergence ratio for divergence-samples samples in a row, the limit is
// multiplied by the cut at once instead of being smoothed down. A dropped
// sample takes the smallest gradient step (0.5) and leaves the averages
// alone. Conversely,
// when the long average is more than twice the short one (latency fell
// after a long overload), it decays by 5% a sample to catch up.
type Gradient2 struct {
	limit, min, max       float64
	smooth, tolerance     float64
	downSmooth            float64 // smoothing of a step down; < 0: smooth
	longDamping           float64
	divRatio, cut         float64
	divSamples, diverging int
	headroom              func(float64) float64
	short, long           ema
}

// Gradient2Option configures a Gradient2.
type Gradient2Option func(*Gradient2)

// WithGradient2Initial sets the starting limit. Defaults to
// DefaultGradient2Initial.
func WithGradient2Initial(n int) Gradient2Option { return func(g *Gradient2) { g.limit = float64(n) } }

// WithGradient2Min sets the lowest limit. Defaults to DefaultGradient2Min.
func WithGradient2Min(n int) Gradient2Option { return func(g *Gradient2) { g.min = float64(n) } }

// WithGradient2Max sets the highest limit. Defaults to DefaultGradient2Max.
func WithGradient2Max(n int) Gradient2Option { return func(g *Gradient2) { g.max = float64(n) } }

// WithGradient2Smoothing sets the weight, in (0, 1], of a new limit against
// the old one. Defaults to DefaultGradient2Smoothing.
func WithGradient2Smoothing(s float64) Gradient2Option { return func(g *Gradient2) { g.smooth = s } }

// WithGradient2DownSmoothing sets the smoothing, in (0, 1], of a step
// that lowers the limit, apart from one that raises it: a low value keeps
// a short stall (a GC pause, a stalled VM: every request at once looks
// slow) from cutting a limit in half window after window, while a
// sustained overload still brings it down in a few steps, and the
// divergence cut still halves it at once. Defaults to the smoothing.
func WithGradient2DownSmoothing(s float64) Gradient2Option {
	return func(g *Gradient2) { g.downSmooth = s }
}

// WithGradient2Tolerance sets how much, as a ratio >= 1, the short average
// may exceed the long one before the limit shrinks. Defaults to
// DefaultGradient2Tolerance.
func WithGradient2Tolerance(t float64) Gradient2Option { return func(g *Gradient2) { g.tolerance = t } }

// WithGradient2Windows sets the sample windows of the short and the long
// average (short < long). Default to DefaultGradient2ShortWindow and
// DefaultGradient2LongWindow.
func WithGradient2Windows(short, long int) Gradient2Option {
	return func(g *Gradient2) { g.short.window, g.long.window = short, long }
}

// WithGradient2LongDamping sets the fraction, in [0, 1], of its normal rate
// at which the long average may rise while the short one is above it; 0
// freezes it (a lasting rise of the service's own latency is then never
// learned).
// Defaults to DefaultGradient2LongDamping.
func WithGradient2LongDamping(d float64) Gradient2Option {
	return func(g *Gradient2) { g.longDamping = d }
}

// WithGradient2Divergence sets the hard cut: after samples samples in a row
// with short/long above ratio, the limit is multiplied by cut in (0, 1).
// Defaults to DefaultGradient2DivergenceRatio,
// DefaultGradient2DivergenceSamples and DefaultGradient2Cut.
func WithGradient2Divergence(ratio float64, samples int, cut float64) Gradient2Option {
	return func(g *Gradient2) { g.divRatio, g.divSamples, g.cut = ratio, samples, cut }
}

// WithGradient2Headroom sets the queue headroom, in requests, as a function
// of the limit. Defaults to DefaultGradient2Headroom.
func WithGradient2Headroom(f func(limit float64) float64) Gradient2Option {
	return func(g *Gradient2) { g.headroom = f }
}

// NewGradient2 returns a Gradient2 algorithm. It returns an error wrapping
// ErrInvalidOption for bounds that do not satisfy 1 <= min <= initial <=
// max or for any other option out of the range its doc states.
func NewGradient2(opts ...Gradient2Option) (*Gradient2, error) {
	g := &Gradient2{
		limit: DefaultGradient2Initial, min: DefaultGradient2Min, max: DefaultGradient2Max,
		smooth: DefaultGradient2Smoothing, tolerance: DefaultGradient2Tolerance, downSmooth: -1,
		longDamping: DefaultGradient2LongDamping, divRatio: DefaultGradient2DivergenceRatio,
		divSamples: DefaultGradient2DivergenceSamples, cut: DefaultGradient2Cut,
		headroom: DefaultGradient2Headroom,
		short:    ema{window: DefaultGradient2ShortWindow},
		long:     ema{window: DefaultGradient2LongWindow},
	}
	for _, o := range opts {
		o(g)
	}
	if err := checkBounds(int(g.limit), int(g.min), int(g.max)); err != nil {
		return nil, err
	}
	switch {
	case !(g.smooth > 0 && g.smooth <= 1):
		return nil, invalidf("Gradient2 smoothing must be in (0, 1], got %g", g.smooth)
	case g.downSmooth != -1 && !(g.downSmooth > 0 && g.downSmooth <= 1):
		return nil, invalidf("Gradient2 down smoothing must be in (0, 1], got %g", g.downSmooth)
	case !(g.tolerance >= 1):
		return nil, invalidf("Gradient2 tolerance must be >= 1, got %g", g.tolerance)
	case g.short.window < 1 || g.long.window <= g.short.window:
		return nil, invalidf("Gradient2 needs 1 <= short window (%d) < long window (%d)",
			g.short.window, g.long.window)
	case !(g.longDamping >= 0 && g.longDamping <= 1):
		return nil, invalidf("Gradient2 long damping must be in [0, 1], got %g", g.longDamping)
	case !(g.divRatio > 1) || g.divSamples < 1 || !(g.cut > 0 && g.cut < 1):
		return nil, invalidf("Gradient2 divergence needs ratio > 1 (%g), samples >= 1 (%d), cut in (0, 1) (%g)",
			g.divRatio, g.divSamples, g.cut)
	case g.headroom == nil:
		return nil, invalidf("Gradient2 headroom is nil")
	}
	return g, nil
}

// Update applies one sample and returns the new limit.
func (g *Gradient2) Update(s Sample) int {
	if s.Dropped {
		// A drop's RTT is a timeout, not a service time: keep it out of
		// the averages and back off as hard as a gradient can.
		g.diverging = 0
		g.step(0.5)
		return g.Limit()
	}
	if s.RTT <= 0 {
		return g.Limit()
	}
	rtt := float64(s.RTT)
	g.short.add(rtt)
	short := g.short.value
	switch {
	case g.long.count == 0:
		// The long average starts at the first sample rather than
		// averaging a warm-up: the first requests meet the emptiest queue
		// there will be, the best floor to measure against.
		g.long.count, g.long.value = g.long.window, rtt
	case short > g.long.value:
		g.long.addWeighted(rtt, g.longDamping)
	default:
		g.long.add(rtt)
	}
	long := g.long.value
	if long > 2*short {
		g.long.value *= 0.95
	}

	if short > g.divRatio*long {
		g.diverging++
	} else {
		g.diverging = 0
	}
	if g.diverging >= g.divSamples {
		g.diverging = 0
		g.limit = clampF(g.limit*g.cut, g.min, g.max)
		return g.Limit()
	}
	if float64(s.InFlight)*2 < g.limit {
		// An idle limiter's RTT says nothing about a larger limit.
		return g.Limit()
	}
	g.step(clampF(g.tolerance*long/short, 0.5, 1))
	return g.Limit()
}

// step moves the limit by one smoothed gradient step.
func (g *Gradient2) step(gradient float64) {
	next := g.limit*gradient + g.headroom(g.limit)
	smooth := g.smooth
	if next < g.limit && g.downSmooth > 0 {
		smooth = g.downSmooth
	}
	next = (1-smooth)*g.limit + smooth*next
	g.limit = clampF(next, g.min, g.max)
}

// Limit returns the current limit.
func (g *Gradient2) Limit() int { return int(g.limit) }

// RTTs returns the short and the long average RTT.
func (g *Gradient2) RTTs() (short, long time.Duration) {
	return time.Duration(math.Round(g.short.value)), time.Duration(math.Round(g.long.value))
}
