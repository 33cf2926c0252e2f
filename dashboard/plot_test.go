package dashboard

import (
	"fmt"
	"math"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/shepherd-go/shepherd/queue"
)

// TestPlotTimeLabelsNeverTouch: at every width a plot accepts and over
// every span a chart shows, the time labels (at plotCharW a character,
// generous for the 10px font) leave a gap between each other, stay
// within the SVG, and there are at least two of them from 400 px on.
func TestPlotTimeLabelsNeverTouch(t *testing.T) {
	t.Parallel()
	t0 := time.Date(2025, 3, 1, 10, 3, 7, 0, time.UTC)
	for _, width := range []int{plotMinW, 320, 400, 500, 640, 700, 1000, 1300, plotMaxW} {
		for _, n := range []int{2, 30, 31, 100, 360, 1440} {
			for _, step := range []time.Duration{queue.HistoryFine, queue.HistoryCoarse} {
				times := make([]time.Time, n)
				for i := range times {
					times[i] = t0.Add(time.Duration(i) * step)
				}
				p := newPlot("x", "x", "u", "", width, times, nil)
				what := fmt.Sprintf("%d px, %d buckets of %v", width, n, step)
				prevRight := math.Inf(-1)
				for _, tk := range p.XTicks {
					half := float64(len(tk.Label)*plotCharW) / 2
					left, right := float64(tk.At)-half, float64(tk.At)+half
					assert.GreaterOrEqual(t, left-prevRight, float64(plotLabelGap)-1, "%s: %q touches the label before it", what, tk.Label)
					assert.GreaterOrEqual(t, left, 0.0, "%s: %q", what, tk.Label)
					assert.LessOrEqual(t, right, float64(p.Width), "%s: %q", what, tk.Label)
					prevRight = right
				}
				if width >= 400 && times[n-1].Sub(times[0]) >= 5*time.Minute {
					assert.GreaterOrEqual(t, len(p.XTicks), 2, what)
				}
				// The axis's title has a row of its own, below the labels.
				assert.Greater(t, p.XTitleY-p.XLabelY, 10, what)
				assert.LessOrEqual(t, p.XTitleY, p.Height, what)
			}
		}
	}
}

// TestPlotWidth: ?cw= sets the width the plots are drawn at, within
// bounds; anything else gives the default.
func TestPlotWidth(t *testing.T) {
	t.Parallel()
	for in, want := range map[string]int{"": plotW, "x": plotW, "-5": plotW, "0": plotW, "100": plotMinW, "655": 655, "99999": plotMaxW} {
		assert.Equal(t, want, plotWidth(in), "cw=%q", in)
	}
	p := newPlot("x", "x", "u", "", 900, nil, nil)
	assert.Equal(t, 900, p.Width)
	assert.Equal(t, 900-plotRight, p.X1)
}

// TestChartsShowTheHistoryThereIs: a queue whose history starts 4
// minutes into the range is charted from there (at least minShown
// buckets), not over a nearly empty hour; a full hour is charted whole.
func TestChartsShowTheHistoryThereIs(t *testing.T) {
	t.Parallel()
	r := chartRanges[0]
	t0 := time.Date(2025, 3, 1, 10, 0, 0, 0, time.UTC)
	hist := make([]queue.HistoryPoint, r.N)
	for i := range hist {
		hist[i].At = t0.Add(time.Duration(i) * r.Step)
	}
	for i := r.N - 24; i < r.N; i++ { // 4 minutes
		hist[i].Done = 3
	}
	c := newQueueCharts(r, hist, 640)
	require.NotEmpty(t, c.Since)
	assert.Equal(t, hist[r.N-minShown].At.Format(clockFormat), c.Since, "at least minShown buckets")
	assert.Equal(t, hist[r.N-minShown].At.Format(clockFormat), c.Throughput.From)

	hist[r.N-100].Sampled = true // a depth sample 100 buckets back
	c = newQueueCharts(r, hist, 640)
	assert.Equal(t, hist[r.N-100].At.Format(clockFormat), c.Throughput.From)

	hist[0].Failed = 1
	c = newQueueCharts(r, hist, 640)
	assert.Empty(t, c.Since, "the whole range holds history")
	assert.Equal(t, hist[0].At.Format(clockFormat), c.Throughput.From)
}
