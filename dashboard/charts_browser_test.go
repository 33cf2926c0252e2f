package dashboard

import (
	"context"
	"regexp"
	"strconv"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/shepherd-go/shepherd/internal/redistest"
	"github.com/shepherd-go/shepherd/queue"
)

// TestQueueChartInTheBrowser: an open queue page draws its throughput
// chart with axis labels, and the chart rises, in place, once a serving
// process has run tasks and written its history to Redis (Close flushes
// it); the day range shows it too.
func TestQueueChartInTheBrowser(t *testing.T) {
	t.Parallel()
	ctx := tab(t, 60*time.Second)
	q, err := queue.Open(ctx, srv.Client(), redistest.Name(t))
	require.NoError(t, err)
	t.Cleanup(func() { _ = q.Close(context.Background()) })
	_, err = q.Serve(func(ctx context.Context, task *queue.Task) ([]byte, error) { return nil, nil }, queue.WithWorkers(4))
	require.NoError(t, err)
	_, base := serve(t, WithRefreshEvery(200*time.Millisecond))

	const peak = `document.querySelector('#chart-throughput [data-series="done/s"] b[data-field=peak]').textContent`
	const line = `document.querySelector('#chart-throughput path[data-series="done/s"]').getAttribute('d')`
	var before, ticks, units []string
	var beforePeak string
	require.NoError(t, chromedp.Run(ctx,
		chromedp.Navigate(base+"/queue/"+q.Name()),
		chromedp.WaitVisible("#chart-throughput svg", chromedp.ByQuery),
		chromedp.Evaluate(peak, &beforePeak),
		chromedp.Evaluate(`Array.from(document.querySelectorAll('#chart-throughput text[data-axis=time]')).map(e => e.textContent)`, &ticks),
		chromedp.Evaluate(`Array.from(document.querySelectorAll('#chart-throughput text.unit')).map(e => e.textContent)`, &units),
		chromedp.Evaluate(`[`+line+`]`, &before),
	))
	assert.Equal(t, "0", beforePeak, "nothing ran yet")
	require.GreaterOrEqual(t, len(ticks), 3, "time labels")
	for _, tk := range ticks {
		assert.Regexp(t, `^\d\d:\d\d$`, tk)
	}
	assert.Contains(t, units, "tasks/s")
	assert.Contains(t, units, "time (UTC)")

	// A serving process runs 20 tasks and closes, writing its history.
	for range 20 {
		_, err := q.Submit(ctx, nil)
		require.NoError(t, err)
	}
	c, err := queue.NewClient(srv.Client(), q.Name())
	require.NoError(t, err)
	require.Eventually(t, func() bool {
		st, err := c.Stats(ctx)
		return err == nil && st.Available == 0 && st.InFlight == 0
	}, 10*time.Second, 20*time.Millisecond)
	require.NoError(t, q.Close(ctx))

	// The open page updates in place: its line rises above the axis.
	require.NoError(t, chromedp.Run(ctx, chromedp.Poll(peak+` !== '0'`, nil, chromedp.WithPollingTimeout(15*time.Second))),
		"the chart did not show the history written")
	var after string
	require.NoError(t, chromedp.Run(ctx, chromedp.Evaluate(line, &after)))
	assert.NotEqual(t, before[0], after)
	axis, top := lowestY(after), highestY(after)
	assert.Less(t, top, axis, "the done/s line rises above its zero: %s", after)

	// The day range, by its link.
	var dayPeak string
	require.NoError(t, chromedp.Run(ctx,
		chromedp.Click(`#ranges a[data-range=day]`, chromedp.ByQuery),
		chromedp.WaitVisible(`#ranges b[data-range=day]`, chromedp.ByQuery),
		chromedp.WaitVisible("#chart-throughput svg", chromedp.ByQuery),
		chromedp.Evaluate(peak, &dayPeak),
	))
	assert.NotEqual(t, "0", dayPeak, "the day's buckets hold the tasks too")
}

var pathPoint = regexp.MustCompile(`[ML](\d+) (\d+)`)

// lowestY and highestY are the largest and the smallest y of a path's
// points: its lowest and its highest point on the screen.
func lowestY(d string) int {
	out := -1
	for _, m := range pathPoint.FindAllStringSubmatch(d, -1) {
		y, _ := strconv.Atoi(m[2])
		out = max(out, y)
	}
	return out
}

func highestY(d string) int {
	out := 1 << 30
	for _, m := range pathPoint.FindAllStringSubmatch(d, -1) {
		y, _ := strconv.Atoi(m[2])
		out = min(out, y)
	}
	return out
}
