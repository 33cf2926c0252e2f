package limit

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

const ms = time.Millisecond

// step is one scripted sample and the limit it must produce.
type step struct {
	name string
	s    Sample
	want int
}

func runScript(t *testing.T, alg Algorithm, script []step) {
	t.Helper()
	for i, st := range script {
		require.Equal(t, st.want, alg.Update(st.s), "step %d (%s): %+v", i, st.name, st.s)
		require.Equal(t, st.want, alg.Limit(), "step %d (%s): Limit", i, st.name)
	}
}

func TestFixed(t *testing.T) {
	t.Parallel()
	f, err := NewFixed(7)
	require.NoError(t, err)
	runScript(t, f, []step{
		{"slow", Sample{RTT: time.Hour, InFlight: 7}, 7},
		{"drop", Sample{RTT: ms, InFlight: 7, Dropped: true}, 7},
	})
	_, err = NewFixed(0)
	assert.ErrorIs(t, err, ErrInvalidOption)
}

func TestAIMDScript(t *testing.T) {
	t.Parallel()
	a, err := NewAIMD(WithAIMDMin(10), WithAIMDMax(22))
	require.NoError(t, err)
	runScript(t, a, []step{
		{"success near limit", Sample{RTT: 10 * ms, InFlight: 10}, 21},
		{"success near limit", Sample{RTT: 10 * ms, InFlight: 11}, 22},
		{"at max", Sample{RTT: 10 * ms, InFlight: 22}, 22},
		{"app-limited", Sample{RTT: 10 * ms, InFlight: 5}, 22},
		{"rising RTT below timeout", Sample{RTT: 4 * time.Second, InFlight: 22}, 22},
		{"drop", Sample{RTT: 10 * ms, InFlight: 22, Dropped: true}, 19},
		{"timeout", Sample{RTT: 6 * time.Second, InFlight: 19}, 17},
		{"drop", Sample{InFlight: 17, Dropped: true}, 15},
		{"drop", Sample{InFlight: 15, Dropped: true}, 13},
		{"drop", Sample{InFlight: 13, Dropped: true}, 11},
		{"drop at min", Sample{InFlight: 11, Dropped: true}, 10},
		{"falling RTT", Sample{RTT: ms, InFlight: 10}, 11},
	})
}

func TestVegasScript(t *testing.T) {
	t.Parallel()
	clock := newFakeClock()
	v, err := NewVegas(WithVegasClock(clock.Now))
	require.NoError(t, err)
	runScript(t, v, []step{
		{"first sample sets minRTT", Sample{RTT: 10 * ms, InFlight: 20}, 20},
		{"no queue: fast growth +beta", Sample{RTT: 10 * ms, InFlight: 20}, 26},
		{"no queue", Sample{RTT: 10 * ms, InFlight: 26}, 32},
		// queue = ceil(32 × (1 − 10/20)) = 16 > beta: shrink by 1.
		{"rising RTT", Sample{RTT: 20 * ms, InFlight: 32}, 31},
		// queue = ceil(31 × (1 − 10/11)) = 3: between alpha and beta.
		{"slight queue holds", Sample{RTT: 11 * ms, InFlight: 31}, 31},
		// queue = ceil(31 × (1 − 10/10.5)) = 2 < alpha: grow by 1.
		{"small queue grows", Sample{RTT: 10500 * time.Microsecond, InFlight: 31}, 32},
		{"drop", Sample{RTT: 10 * ms, InFlight: 32, Dropped: true}, 31},
		{"app-limited ignored", Sample{RTT: 50 * ms, InFlight: 10}, 31},
		{"falling RTT lowers minRTT", Sample{RTT: 5 * ms, InFlight: 31}, 31},
		// queue = ceil(31 × (1 − 5/10)) = 16: shrink.
		{"old RTT is now a queue", Sample{RTT: 10 * ms, InFlight: 31}, 30},
	})
	assert.Equal(t, 5*ms, v.MinRTT())

	// After the probe interval the floor is measured afresh, so a service
	// that became slower for good is not seen as queueing forever. The
	// clock is read every 16th sample: ten were fed, five more change
	// nothing (app-limited), the 16th probes.
	clock.Advance(DefaultVegasProbeInterval)
	for range 5 {
		require.Equal(t, 30, v.Update(Sample{RTT: 40 * ms, InFlight: 1}))
	}
	assert.Equal(t, 5*ms, v.MinRTT())
	runScript(t, v, []step{
		{"probe takes a new floor", Sample{RTT: 40 * ms, InFlight: 30}, 30},
		{"no queue at the new floor", Sample{RTT: 40 * ms, InFlight: 30}, 36},
	})
	assert.Equal(t, 40*ms, v.MinRTT())
}

func TestVegasBoundsAndSmoothing(t *testing.T) {
	t.Parallel()
	v, err := NewVegas(WithVegasInitial(10), WithVegasMax(12), WithVegasSmoothing(0.5),
		WithVegasClock(newFakeClock().Now))
	require.NoError(t, err)
	runScript(t, v, []step{
		{"floor", Sample{RTT: 10 * ms, InFlight: 10}, 10},
		// +6 is clamped to 12, then halfway: 11.
		{"growth clamped and smoothed", Sample{RTT: 10 * ms, InFlight: 10}, 11},
		{"again", Sample{RTT: 10 * ms, InFlight: 11}, 11}, // 11.5
		{"again", Sample{RTT: 10 * ms, InFlight: 11}, 11}, // 11.75
	})
}

func TestGradient2Script(t *testing.T) {
	t.Parallel()
	// A short window of 1 makes the short average the last sample, full
	// smoothing applies each step whole and a constant headroom of 2 keeps
	// the arithmetic by hand.
	g, err := NewGradient2(WithGradient2Windows(1, 600), WithGradient2Smoothing(1),
		WithGradient2Headroom(func(float64) float64 { return 2 }),
		WithGradient2Divergence(2, 3, 0.5))
	require.NoError(t, err)
	runScript(t, g, []step{
		{"first sample anchors the long average", Sample{RTT: 10 * ms, InFlight: 20}, 22},
		{"steady RTT grows by the headroom", Sample{RTT: 10 * ms, InFlight: 22}, 24},
		// long ≈ 10ms (damped), short 20ms: 24 × 0.5 + 2 = 14.
		{"rising RTT", Sample{RTT: 20 * ms, InFlight: 24}, 14},
		// 14 × 10/15 + 2 = 11.33.
		{"still high", Sample{RTT: 15 * ms, InFlight: 14}, 11},
		{"falling RTT grows again", Sample{RTT: 10 * ms, InFlight: 11}, 13},
		// 13.33 × 0.5 + 2 = 8.67.
		{"drop", Sample{InFlight: 13, Dropped: true}, 8},
		{"app-limited ignored", Sample{RTT: 50 * ms, InFlight: 2}, 8},
	})
	short, long := g.RTTs()
	assert.Equal(t, 50*ms, short)
	assert.InDelta(t, float64(10*ms), float64(long), float64(ms/100), "long average must not follow the rise")
}

func TestGradient2SustainedDivergenceCutsHard(t *testing.T) {
	t.Parallel()
	g, err := NewGradient2(WithGradient2Initial(100), WithGradient2Windows(1, 600),
		WithGradient2Smoothing(0.1), WithGradient2Headroom(func(float64) float64 { return 0 }),
		WithGradient2Divergence(2, 3, 0.5))
	require.NoError(t, err)
	runScript(t, g, []step{
		{"anchor", Sample{RTT: 10 * ms, InFlight: 100}, 100},
		// Smoothed gradient steps: 100 × (0.9 + 0.1 × 0.5) = 95, then 90.25.
		{"diverging 1", Sample{RTT: 30 * ms, InFlight: 100}, 95},
		{"diverging 2", Sample{RTT: 30 * ms, InFlight: 100}, 90},
		{"diverging 3: hard cut", Sample{RTT: 30 * ms, InFlight: 100}, 45},
	})
}

func TestGradient2LongAverageDoesNotDriftUnderOverload(t *testing.T) {
	t.Parallel()
	g, err := NewGradient2()
	require.NoError(t, err)
	g.Update(Sample{RTT: 10 * ms, InFlight: 20})
	for range 5000 {
		g.Update(Sample{RTT: 15 * ms, InFlight: g.Limit()})
	}
	_, long := g.RTTs()
	// Undamped, 5000 samples of a 600-sample average would be at 15ms.
	assert.Less(t, long, 11*ms)
	// After the overload, latency falls back and the limit grows again.
	before := g.Limit()
	for range 20 {
		g.Update(Sample{RTT: 10 * ms, InFlight: g.Limit()})
	}
	assert.Greater(t, g.Limit(), before)
}

// recorder is an Algorithm that records the samples it is fed; its limit
// is 100 plus their number.
type recorder struct {
	samples []Sample
}

func (r *recorder) Update(s Sample) int { r.samples = append(r.samples, s); return r.Limit() }
func (r *recorder) Limit() int          { return 100 + len(r.samples) }

func TestWindowed(t *testing.T) {
	t.Parallel()
	clock := newFakeClock()
	rec := &recorder{}
	w, err := NewWindowed(rec, WithWindowClock(clock.Now), WithWindowBounds(100*ms, time.Second),
		WithWindowMinSamples(3), WithWindowPercentile(0.5))
	require.NoError(t, err)

	// Window 1: three samples within 100ms are not enough time.
	for _, rtt := range []time.Duration{30, 10, 20} {
		w.Update(Sample{RTT: rtt * ms, InFlight: int(rtt)})
		clock.Advance(40 * ms)
	}
	require.Empty(t, rec.samples)
	// At 120ms the window holds 4 samples and closes.
	w.Update(Sample{RTT: 40 * ms, InFlight: 1, Dropped: true})
	require.Len(t, rec.samples, 1)
	assert.Equal(t, Sample{RTT: 20 * ms, InFlight: 30, Dropped: true}, rec.samples[0])

	// Window 2 is 2 × 10ms long, bounded below by 100ms; two samples by
	// the maximum of 1s are too few, and the window is discarded.
	w.Update(Sample{RTT: 5 * ms, InFlight: 2})
	clock.Advance(time.Second)
	w.Update(Sample{RTT: 5 * ms, InFlight: 2})
	require.Len(t, rec.samples, 1)

	// The next window is 2 × its predecessor's minimum RTT long when the
	// bounds allow: here 2 × 30ms = 60ms.
	rec3 := &recorder{}
	w3, err := NewWindowed(rec3, WithWindowClock(clock.Now), WithWindowBounds(ms, time.Second),
		WithWindowMinSamples(1))
	require.NoError(t, err)
	w3.Update(Sample{RTT: 30 * ms, InFlight: 1}) // opens a 1ms window
	clock.Advance(ms)
	w3.Update(Sample{RTT: 30 * ms, InFlight: 1}) // closes the first window
	require.Len(t, rec3.samples, 1)
	w3.Update(Sample{RTT: 30 * ms, InFlight: 1})
	clock.Advance(59 * ms)
	w3.Update(Sample{RTT: 30 * ms, InFlight: 1})
	require.Len(t, rec3.samples, 1, "window closed before 2 × minRTT")
	clock.Advance(ms)
	w3.Update(Sample{RTT: 30 * ms, InFlight: 1})
	require.Len(t, rec3.samples, 2)

	// The minimum (percentile 0) variant sees the floor.
	rec2 := &recorder{}
	w2, err := NewWindowed(rec2, WithWindowClock(clock.Now), WithWindowBounds(10*ms, 10*ms),
		WithWindowMinSamples(2))
	require.NoError(t, err)
	w2.Update(Sample{RTT: 9 * ms, InFlight: 1})
	w2.Update(Sample{RTT: 7 * ms, InFlight: 1})
	clock.Advance(10 * ms)
	assert.Equal(t, 101, w2.Update(Sample{RTT: 8 * ms, InFlight: 3}))
	assert.Equal(t, []Sample{{RTT: 7 * ms, InFlight: 3}}, rec2.samples)
}

func TestWindowedReservoirBoundsMemory(t *testing.T) {
	t.Parallel()
	clock := newFakeClock()
	rec := &recorder{}
	w, err := NewWindowed(rec, WithWindowClock(clock.Now), WithWindowBounds(ms, ms),
		WithWindowMaxSamples(10), WithWindowPercentile(0.99))
	require.NoError(t, err)
	for i := range 1000 {
		w.Update(Sample{RTT: time.Duration(i+1) * time.Microsecond, InFlight: 1})
	}
	assert.LessOrEqual(t, cap(w.rtts), 64)
	clock.Advance(ms)
	w.Update(Sample{RTT: time.Microsecond, InFlight: 1})
	require.Len(t, rec.samples, 1)
	// The reservoir's p99 is a high RTT, though not necessarily the top.
	assert.Greater(t, rec.samples[0].RTT, 500*time.Microsecond)
}

func TestInvalidOptions(t *testing.T) {
	t.Parallel()
	cases := map[string]func() error{
		"aimd bounds":      func() error { _, err := NewAIMD(WithAIMDMin(5), WithAIMDInitial(2)); return err },
		"aimd backoff":     func() error { _, err := NewAIMD(WithAIMDBackoff(1)); return err },
		"aimd timeout":     func() error { _, err := NewAIMD(WithAIMDTimeout(0)); return err },
		"vegas alpha>beta": func() error { _, err := NewVegas(WithVegasAlpha(7)); return err },
		"vegas smoothing":  func() error { _, err := NewVegas(WithVegasSmoothing(0)); return err },
		"vegas probe":      func() error { _, err := NewVegas(WithVegasProbeInterval(0)); return err },
		"vegas clock":      func() error { _, err := NewVegas(WithVegasClock(nil)); return err },
		"vegas max":        func() error { _, err := NewVegas(WithVegasMax(10)); return err },
		"g2 tolerance":     func() error { _, err := NewGradient2(WithGradient2Tolerance(0.9)); return err },
		"g2 windows":       func() error { _, err := NewGradient2(WithGradient2Windows(10, 10)); return err },
		"g2 damping":       func() error { _, err := NewGradient2(WithGradient2LongDamping(2)); return err },
		"g2 divergence":    func() error { _, err := NewGradient2(WithGradient2Divergence(2, 3, 1)); return err },
		"g2 headroom":      func() error { _, err := NewGradient2(WithGradient2Headroom(nil)); return err },
		"g2 smoothing":     func() error { _, err := NewGradient2(WithGradient2Smoothing(1.5)); return err },
		"window nil":       func() error { _, err := NewWindowed(nil); return err },
		"window bounds":    func() error { _, err := NewWindowed(&recorder{}, WithWindowBounds(2, 1)); return err },
		"window samples":   func() error { _, err := NewWindowed(&recorder{}, WithWindowMinSamples(0)); return err },
		"window max":       func() error { _, err := NewWindowed(&recorder{}, WithWindowMaxSamples(5)); return err },
		"window pct":       func() error { _, err := NewWindowed(&recorder{}, WithWindowPercentile(1)); return err },
	}
	for name, f := range cases {
		assert.ErrorIs(t, f(), ErrInvalidOption, name)
	}
}

func TestVegasMinBoundsDrops(t *testing.T) {
	t.Parallel()
	drops := func(opts ...VegasOption) int {
		v, err := NewVegas(append([]VegasOption{WithVegasInitial(10), WithVegasSmoothing(1),
			WithVegasClock(newFakeClock().Now)}, opts...)...)
		require.NoError(t, err)
		for i := 0; i < 20; i++ {
			v.Update(Sample{RTT: 10 * ms, InFlight: 10, Dropped: true})
		}
		return v.Limit()
	}
	assert.Less(t, drops(), 8, "without a floor, repeated drops go below 8")
	assert.Equal(t, 8, drops(WithVegasMin(8)), "WithVegasMin is the floor")
}

func TestGradient2DownSmoothingSlowsOnlyTheFall(t *testing.T) {
	t.Parallel()
	mk := func(opts ...Gradient2Option) *Gradient2 {
		g, err := NewGradient2(append([]Gradient2Option{WithGradient2Initial(40), WithGradient2Smoothing(1)}, opts...)...)
		require.NoError(t, err)
		return g
	}
	plain, gentle := mk(), mk(WithGradient2DownSmoothing(0.3))
	for range 3 {
		plain.Update(Sample{RTT: 10 * ms, InFlight: 100})
		gentle.Update(Sample{RTT: 10 * ms, InFlight: 100})
	}
	assert.Equal(t, plain.Limit(), gentle.Limit(), "a rise is not slowed")
	for range 3 { // a stall: every request at once looks slow
		plain.Update(Sample{RTT: 40 * ms, InFlight: 100})
		gentle.Update(Sample{RTT: 40 * ms, InFlight: 100})
	}
	t.Logf("after the stall: plain %d, gentle %d", plain.Limit(), gentle.Limit())
	assert.Less(t, plain.Limit(), 20, "without it the limit halves a sample")
	assert.Greater(t, gentle.Limit(), 30)
	_, err := NewGradient2(WithGradient2DownSmoothing(0))
	assert.ErrorIs(t, err, ErrInvalidOption)
}
