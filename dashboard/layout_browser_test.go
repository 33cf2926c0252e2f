package dashboard

import (
	"fmt"
	"testing"
	"time"

	"github.com/chromedp/cdproto/emulation"
	"github.com/chromedp/chromedp"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/shepherd-go/shepherd/pool"
)

// chartLayout is what layoutJS measures of a page's charts.
type chartLayout struct {
	Charts []struct {
		ID       string  `json:"id"`
		SVG      float64 `json:"svg"`      // the SVG's width on the screen
		Column   float64 `json:"column"`   // its figure's content width
		Drawn    float64 `json:"drawn"`    // the width the server drew it at (viewBox)
		Overlaps string  `json:"overlaps"` // the first two texts whose boxes overlap, "" for none
		Labels   int     `json:"labels"`   // the time axis's labels
		Axes     int     `json:"axes"`     // the axis lines
	} `json:"charts"`
	Row       float64 `json:"row"`       // the first row of charts, from its first's left to its last's right
	Container float64 `json:"container"` // the charts' container's width
}

// layoutJS measures the charts (figure.chart) in the container sel.
func layoutJS(sel string) string {
	return fmt.Sprintf(`(() => {
  const c = document.querySelector(%q);
  const figs = Array.from(c.querySelectorAll('figure.chart'));
  const top = figs.length ? figs[0].getBoundingClientRect().top : 0;
  const row = figs.filter(f => Math.abs(f.getBoundingClientRect().top - top) < 2);
  const inter = (a, b) => a.left < b.right - 0.5 && b.left < a.right - 0.5 && a.top < b.bottom - 0.5 && b.top < a.bottom - 0.5;
  return {
    container: c.clientWidth,
    row: row.length ? row[row.length-1].getBoundingClientRect().right - row[0].getBoundingClientRect().left : 0,
    charts: figs.map(f => {
      const svg = f.querySelector('svg');
      const cs = getComputedStyle(f);
      const texts = Array.from(svg.querySelectorAll('text')).filter(t => t.textContent.trim() !== '');
      let overlaps = '';
      for (let i = 0; i < texts.length && !overlaps; i++) {
        for (let j = i + 1; j < texts.length; j++) {
          if (inter(texts[i].getBoundingClientRect(), texts[j].getBoundingClientRect())) {
            overlaps = JSON.stringify(texts[i].textContent) + ' and ' + JSON.stringify(texts[j].textContent);
            break;
          }
        }
      }
      return {
        id: f.id || '',
        svg: svg.getBoundingClientRect().width,
        column: f.clientWidth - parseFloat(cs.paddingLeft) - parseFloat(cs.paddingRight),
        drawn: svg.viewBox.baseVal ? svg.viewBox.baseVal.width : 0,
        overlaps: overlaps,
        labels: svg.querySelectorAll('text[data-axis=time]').length,
        axes: svg.querySelectorAll('line.axis').length,
      };
    }),
  };
})()`, sel)
}

// checkLayout asserts that every chart fills its column, that the
// charts of a row fill the container, and that no two texts of a chart
// overlap.
func checkLayout(t *testing.T, what string, l chartLayout) {
	t.Helper()
	require.NotEmpty(t, l.Charts, "%s: no chart", what)
	assert.GreaterOrEqual(t, l.Row, 0.9*l.Container, "%s: the charts' first row is %.0f px of %.0f", what, l.Row, l.Container)
	for _, c := range l.Charts {
		assert.GreaterOrEqual(t, c.SVG, 0.9*c.Column, "%s %s: the chart is %.0f px wide in a column of %.0f", what, c.ID, c.SVG, c.Column)
		assert.Empty(t, c.Overlaps, "%s %s: texts overlap", what, c.ID)
		assert.GreaterOrEqual(t, c.Labels, 2, "%s %s: time labels", what, c.ID)
		assert.GreaterOrEqual(t, c.Axes, 2, "%s %s: axes", what, c.ID)
	}
}

// TestChartLayout: at 1400 px and at 600 px, the queue page's charts
// fill their columns and the columns fill the page, no label of a chart
// touches another or the axis's title; once the page measured its
// column, the server draws the charts at that width (1:1, text at its
// size), and they still fit.
func TestChartLayout(t *testing.T) {
	t.Parallel()
	name, _ := ranHistory(t, 5, 1)
	_, base := serve(t, WithRefreshEvery(static))
	ctx := tab(t, 60*time.Second)
	for _, width := range []int64{1400, 600} {
		var l chartLayout
		require.NoError(t, chromedp.Run(ctx,
			emulation.SetDeviceMetricsOverride(width, 900, 1, false),
			chromedp.Navigate(base+"/queue/"+name),
			chromedp.WaitVisible("#chart-throughput svg", chromedp.ByQuery),
			chromedp.Evaluate(layoutJS("#charts .charts"), &l),
		))
		checkLayout(t, fmt.Sprintf("%d px, as first drawn", width), l)

		// The page redraws its charts at their column's width.
		require.NoError(t, chromedp.Run(ctx,
			chromedp.Poll(`(() => { const s = document.querySelector('#chart-throughput svg');
				return Math.abs(s.viewBox.baseVal.width - s.getBoundingClientRect().width) < 8; })()`, nil,
				chromedp.WithPollingTimeout(10*time.Second)),
			chromedp.Evaluate(layoutJS("#charts .charts"), &l),
		), "%d px: the charts were not redrawn at their width", width)
		checkLayout(t, fmt.Sprintf("%d px, redrawn", width), l)
		for _, c := range l.Charts {
			assert.InDelta(t, c.SVG, c.Drawn, 8, "%d px %s: drawn at its width", width, c.ID)
		}
	}
	require.NoError(t, chromedp.Run(ctx, emulation.ClearDeviceMetricsOverride()))
}

// TestChartLayoutResize: a window made narrower redraws the charts at
// their new width.
func TestChartLayoutResize(t *testing.T) {
	t.Parallel()
	name, _ := ranHistory(t, 3, 0)
	_, base := serve(t, WithRefreshEvery(static))
	ctx := tab(t, 60*time.Second)
	var drawn float64
	require.NoError(t, chromedp.Run(ctx,
		emulation.SetDeviceMetricsOverride(1400, 900, 1, false),
		chromedp.Navigate(base+"/queue/"+name),
		chromedp.WaitVisible("#chart-throughput svg", chromedp.ByQuery),
		chromedp.Poll(`Math.abs(document.querySelector('#chart-throughput svg').viewBox.baseVal.width - document.querySelector('#chart-throughput svg').getBoundingClientRect().width) < 8`, nil,
			chromedp.WithPollingTimeout(10*time.Second)),
		emulation.SetDeviceMetricsOverride(500, 900, 1, false),
		chromedp.Poll(`document.querySelector('#chart-throughput svg').viewBox.baseVal.width < 520`, nil,
			chromedp.WithPollingTimeout(10*time.Second)),
		chromedp.Evaluate(`document.querySelector('#chart-throughput svg').viewBox.baseVal.width`, &drawn),
		emulation.ClearDeviceMetricsOverride(),
	))
	assert.Less(t, drawn, 520.0)
}

// TestPoolChartsFromRedis: a pool's page charts the history its janitor
// keeps in Redis (a dashboard started after the samples were taken shows
// them), with axes, units and time labels, filling their columns at
// 1400 px and at 600 px, no text overlapping.
func TestPoolChartsFromRedis(t *testing.T) {
	t.Parallel()
	name, _, _ := livePool(t, 2, keysN("k", 7)...)
	ctx := testCtx(t, 60*time.Second)
	require.Eventually(t, func() bool {
		h, err := pool.History(ctx, srv.Client(), name, 360)
		return err == nil && len(h) > 0 && h[len(h)-1].Jobs == 7
	}, 2*pool.HistoryStep, 50*time.Millisecond, "the janitor sampled no history of the 7 jobs")
	_, base := serve(t, WithRefreshEvery(static))
	tctx := tab(t, 60*time.Second)
	for _, width := range []int64{1400, 600} {
		var l chartLayout
		var units []string
		var jobsLast string
		require.NoError(t, chromedp.Run(tctx,
			emulation.SetDeviceMetricsOverride(width, 900, 1, false),
			chromedp.Navigate(base+"/pool/"+name),
			chromedp.WaitVisible("#chart-pool-jobs svg", chromedp.ByQuery),
			chromedp.Evaluate(`Array.from(document.querySelectorAll('#charts text.unit')).map(e => e.textContent)`, &units),
			chromedp.Evaluate(`document.querySelector('#chart-pool-jobs [data-series="jobs"] b[data-field=last]').textContent`, &jobsLast),
			chromedp.Evaluate(layoutJS("#charts .charts"), &l),
		))
		checkLayout(t, fmt.Sprintf("pool, %d px", width), l)
		assert.Len(t, l.Charts, 2)
		assert.Equal(t, "7", jobsLast, "the jobs line ends at the 7 jobs")
		for _, u := range []string{"jobs", "workers", "per 10 s", "time (UTC)"} {
			assert.Contains(t, units, u, "an axis's unit")
		}
	}
}
