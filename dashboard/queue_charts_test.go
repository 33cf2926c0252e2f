package dashboard

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/shepherd-go/shepherd/internal/redistest"
	"github.com/shepherd-go/shepherd/queue"
)

// ranHistory runs ok tasks that succeed and dead ones that fail for good
// on a new queue, then closes it, which writes its history to Redis, and
// returns the queue's name and a client.
func ranHistory(t *testing.T, ok, dead int) (string, *queue.Client) {
	t.Helper()
	ctx := testCtx(t, 20*time.Second)
	name := redistest.Name(t)
	q, err := queue.Open(ctx, srv.Client(), name)
	require.NoError(t, err)
	_, err = q.Serve(func(ctx context.Context, task *queue.Task) ([]byte, error) {
		time.Sleep(2 * time.Millisecond) // a handler run time to chart
		if string(task.Payload) == "fail" {
			return nil, queue.Permanent(errors.New("no"))
		}
		return nil, nil
	}, queue.WithWorkers(4))
	require.NoError(t, err)
	var fs []*queue.Future
	for i := range ok + dead {
		payload := "ok"
		if i >= ok {
			payload = "fail"
		}
		f, err := q.Submit(ctx, []byte(payload))
		require.NoError(t, err)
		fs = append(fs, f)
	}
	for _, f := range fs {
		select {
		case <-f.Done():
		case <-ctx.Done():
			t.Fatal("the tasks did not finish")
		}
	}
	require.NoError(t, q.Close(ctx)) // flushes the history
	c, err := queue.NewClient(srv.Client(), name)
	require.NoError(t, err)
	return name, c
}

// legend returns the numbers a plot's legend shows for a series.
func legend(t *testing.T, body, series string) (last, peak, total string) {
	t.Helper()
	re := regexp.MustCompile(`data-series="` + regexp.QuoteMeta(series) + `">[^<]*: last <b data-field="last">([^<]*)</b>, peak <b data-field="peak">([^<]*)</b>(?:, <b data-field="total">([^<]*)</b>)?`)
	m := re.FindStringSubmatch(body)
	require.NotNil(t, m, "no legend for %q", series)
	return m[1], m[2], m[3]
}

// TestQueueChartsFromRedisHistory: the queue page draws its charts from
// the history its processes wrote to Redis: a dashboard started after
// they closed shows it, with axes, units, UTC times and a legend that
// carries the history's numbers, over the last hour or the last day; two
// dashboards show the same.
func TestQueueChartsFromRedisHistory(t *testing.T) {
	t.Parallel()
	name, c := ranHistory(t, 9, 2)
	ctx := testCtx(t, 20*time.Second)
	_, base := serve(t) // started after the queue closed
	page := base + "/queue/" + name

	for _, rng := range []struct {
		name, query, label, per string
		step                    time.Duration
		n                       int
	}{
		{"hour", "", "last hour", "per 10 s", queue.HistoryFine, 360},
		{"day", "?range=day", "last day", "per 1 min", queue.HistoryCoarse, 1440},
	} {
		hist, err := c.History(ctx, rng.step, rng.n)
		require.NoError(t, err)
		var done, failed, dead, peakDone int64
		handler := false
		for _, h := range hist {
			done, failed, dead, peakDone = done+h.Done, failed+h.Failed, dead+h.Dead, max(peakDone, h.Done)
			handler = handler || h.HandlerP99 > 0
		}
		require.EqualValues(t, 9, done, "%s: the history holds the tasks done", rng.name)
		require.EqualValues(t, 2, dead, rng.name)
		require.EqualValues(t, 2, failed, rng.name)
		require.True(t, handler, rng.name)

		code, body := get(t, page+rng.query)
		require.Equal(t, http.StatusOK, code, body)
		assert.Contains(t, body, `<b data-range="`+rng.name+`">`+rng.label+`</b>`, "the range shown")
		for _, id := range []string{"chart-throughput", "chart-dead", "chart-handler", "chart-wait", "chart-depth"} {
			assert.Contains(t, body, `id="`+id+`"`)
		}
		for _, unit := range []string{">tasks/s</text>", ">ms</text>", ">tasks</text>", ">time (UTC)</text>", ">new " + rng.per + "</text>", ">held</text>"} {
			assert.Contains(t, body, unit, "%s: an axis's unit", rng.name)
		}
		assert.Regexp(t, `data-axis="time">\d\d:\d\d</text>`, body, "time labels")
		_, peak, _ := legend(t, body, "done/s")
		assert.Equal(t, number(float64(peakDone)/rng.step.Seconds()), peak, "%s: done per second, at its peak", rng.name)
		_, _, total := legend(t, body, "new dead letters "+rng.per)
		assert.Equal(t, "2", total, "%s: the dead letters, per bucket on their own chart", rng.name)
		_, peak, _ = legend(t, body, "handler p99 ms")
		assert.NotEqual(t, "-", peak, "%s: the handler's run time", rng.name)
		assert.Regexp(t, `<path class="line s0" d="M\d+ \d+( [ML]\d+ \d+)+" data-series="done/s">`, body)

		// The JSON twin: the same buckets, in the CLI's style.
		twin := page + "?format=json"
		if rng.query != "" {
			twin = page + rng.query + "&format=json"
		}
		code, body = get(t, twin)
		require.Equal(t, http.StatusOK, code, body)
		var v struct {
			Range   string           `json:"range"`
			StepMS  float64          `json:"step_ms"`
			History []map[string]any `json:"history"`
		}
		require.NoError(t, json.Unmarshal([]byte(body), &v))
		assert.Equal(t, rng.name, v.Range)
		assert.Equal(t, float64(rng.step.Milliseconds()), v.StepMS)
		require.Len(t, v.History, rng.n)
		var twinDone float64
		for _, h := range v.History {
			twinDone += h["done"].(float64)
		}
		assert.Equal(t, 9.0, twinDone)
		last := v.History[rng.n-1]
		for _, k := range []string{"at", "done", "failed", "dead", "handler_p50_ms", "handler_p99_ms", "wait_p50_ms", "wait_p99_ms", "in_flight", "dead_letters", "sampled"} {
			assert.Contains(t, last, k, "%s: a bucket's key", rng.name)
		}
		assert.Regexp(t, `^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ$`, last["at"])
	}

	// Two dashboards read the same history (retried across a bucket's
	// boundary, when the window moves between the two reads).
	_, other := serve(t)
	require.Eventually(t, func() bool {
		var a, b struct{ History []map[string]any }
		_, ja := get(t, page+"?format=json")
		_, jb := get(t, other+"/queue/"+name+"?format=json")
		return json.Unmarshal([]byte(ja), &a) == nil && json.Unmarshal([]byte(jb), &b) == nil &&
			len(a.History) == 360 && fmt.Sprint(a.History) == fmt.Sprint(b.History)
	}, 10*time.Second, 100*time.Millisecond, "two dashboards show different histories")

	code, body := get(t, page+"?range=week")
	assert.Equal(t, http.StatusBadRequest, code)
	assert.True(t, strings.Contains(body, "hour or day"), body)
}
