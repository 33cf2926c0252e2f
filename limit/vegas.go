package limit

import (
	"math"
	"time"
)

// Defaults of Vegas.
const (
	DefaultVegasInitial       = 20
	DefaultVegasMin           = 1
	DefaultVegasMax           = 1000
	DefaultVegasAlpha         = 3.0
	DefaultVegasBeta          = 6.0
	DefaultVegasSmoothing     = 1.0
	DefaultVegasProbeInterval = 30 * time.Second
)

// Vegas is the delay-based Algorithm of TCP Vegas. It keeps the lowest RTT
// seen (the no-load RTT) and estimates how many requests are queued:
//
//	queue = ceil(limit × (1 − minRTT/RTT))
//
// With lg = max(1, floor(log10(limit))): a queue of at most lg grows the
// limit fast (by beta×lg), a queue below alpha×lg grows it by lg, a queue
// above beta×lg shrinks it by lg, and anything between holds it. A drop
// shrinks it by lg. Samples taken while less than half the limit is in use
// are ignored, since they say nothing about the limit.
//
// Every probe interval (checked every 16 samples) the no-load RTT is
// forgotten and taken again from a sample, so that a permanent change of the service's latency (a
// slower dependency, a faster deployment) does not pin it forever.
//
// Vegas targets a queue of alpha to beta requests: at small limits (say 10)
// that is a large fraction of the limit; lower alpha and beta there.
type Vegas struct {
	limit, min, max     float64
	alpha, beta, smooth float64
	probeInterval       time.Duration
	clock               clock
	clockSet            bool
	minRTT              time.Duration
	nextProbe           time.Duration // clock reading
	sinceCheck          int           // samples since the clock was read
}

// probeCheckEvery is how many samples pass between two readings of the
// clock for the probe: a clock read per sample would cost a sixth of an
// Acquire and Release, and a probe a few samples late changes nothing.
const probeCheckEvery = 16

// VegasOption configures a Vegas.
type VegasOption func(*Vegas)

// WithVegasInitial sets the starting limit. Defaults to DefaultVegasInitial.
func WithVegasInitial(n int) VegasOption { return func(v *Vegas) { v.limit = float64(n) } }

// WithVegasMin sets the lowest limit. Defaults to DefaultVegasMin.
func WithVegasMin(n int) VegasOption { return func(v *Vegas) { v.min = float64(n) } }

// WithVegasMax sets the highest limit. Defaults to DefaultVegasMax.
func WithVegasMax(n int) VegasOption { return func(v *Vegas) { v.max = float64(n) } }

// WithVegasAlpha sets the queue size, per log10 of the limit, below which
// the limit grows. Defaults to DefaultVegasAlpha.
func WithVegasAlpha(a float64) VegasOption { return func(v *Vegas) { v.alpha = a } }

// WithVegasBeta sets the queue size, per log10 of the limit, above which
// the limit shrinks. Defaults to DefaultVegasBeta.
func WithVegasBeta(b float64) VegasOption { return func(v *Vegas) { v.beta = b } }

// WithVegasSmoothing sets the weight, in (0, 1], of a new limit against the
// old one; 1 applies each step in full. Defaults to DefaultVegasSmoothing.
func WithVegasSmoothing(s float64) VegasOption { return func(v *Vegas) { v.smooth = s } }

// WithVegasProbeInterval sets how often the no-load RTT is measured afresh.
// Defaults to DefaultVegasProbeInterval.
func WithVegasProbeInterval(d time.Duration) VegasOption {
	return func(v *Vegas) { v.probeInterval = d }
}

// WithVegasClock sets the clock that schedules probes. Defaults to the
// monotonic clock of time.Now.
func WithVegasClock(now func() time.Time) VegasOption {
	return func(v *Vegas) { v.clock.now, v.clockSet = now, true }
}

// NewVegas returns a Vegas algorithm. It returns an error wrapping
// ErrInvalidOption for bounds that do not satisfy 1 <= min <= initial <=
// max, 0 < alpha < beta, a smoothing outside (0, 1], a probe interval <= 0
// or a nil clock.
func NewVegas(opts ...VegasOption) (*Vegas, error) {
	v := &Vegas{
		limit: DefaultVegasInitial, min: DefaultVegasMin, max: DefaultVegasMax,
		alpha: DefaultVegasAlpha, beta: DefaultVegasBeta, smooth: DefaultVegasSmoothing,
		probeInterval: DefaultVegasProbeInterval,
	}
	for _, o := range opts {
		o(v)
	}
	if err := checkBounds(int(v.limit), int(v.min), int(v.max)); err != nil {
		return nil, err
	}
	if !(v.alpha > 0 && v.alpha < v.beta) {
		return nil, invalidf("Vegas needs 0 < alpha (%g) < beta (%g)", v.alpha, v.beta)
	}
	if err := checkRatio("Vegas smoothing", v.smooth, 0, 1); err != nil {
		return nil, err
	}
	if err := checkPositive("Vegas probe interval", v.probeInterval); err != nil {
		return nil, err
	}
	if v.clockSet && v.clock.now == nil {
		return nil, invalidf("Vegas clock is nil")
	}
	v.nextProbe = v.clock.read() + v.probeInterval
	return v, nil
}

// Update applies one sample and returns the new limit.
func (v *Vegas) Update(s Sample) int {
	if s.RTT <= 0 {
		return v.Limit()
	}
	if v.sinceCheck++; v.sinceCheck >= probeCheckEvery {
		v.sinceCheck = 0
		if now := v.clock.read(); now >= v.nextProbe {
			v.nextProbe = now + v.probeInterval
			v.minRTT = s.RTT
			return v.Limit()
		}
	}
	if v.minRTT == 0 || s.RTT < v.minRTT {
		v.minRTT = s.RTT
		return v.Limit()
	}
	lg := log10Root(v.limit)
	var next float64
	switch {
	case s.Dropped:
		next = v.limit - lg
	case float64(s.InFlight)*2 < v.limit:
		return v.Limit()
	default:
		queue := math.Ceil(v.limit * (1 - float64(v.minRTT)/float64(s.RTT)))
		switch {
		case queue <= lg:
			next = v.limit + v.beta*lg
		case queue < v.alpha*lg:
			next = v.limit + lg
		case queue > v.beta*lg:
			next = v.limit - lg
		default:
			return v.Limit()
		}
	}
	next = clampF(next, v.min, v.max)
	v.limit = (1-v.smooth)*v.limit + v.smooth*next
	return v.Limit()
}

// Limit returns the current limit.
func (v *Vegas) Limit() int { return int(v.limit) }

// MinRTT returns the no-load RTT the estimate is based on, or 0 before the
// first sample.
func (v *Vegas) MinRTT() time.Duration { return v.minRTT }
