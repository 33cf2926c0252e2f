package dashboard

import (
	"fmt"
	"math"
	"time"

	"github.com/shepherd-go/shepherd/queue"
)

// chartRange is a span the queue page's charts can show, chosen with
// ?range=: the queue's history in Redis at one of its steps.
type chartRange struct {
	Name  string // the value of ?range=
	Label string
	Step  time.Duration
	N     int // buckets shown
}

// chartRanges are the queue page's ranges; the first is the default.
var chartRanges = []chartRange{
	{"hour", "last hour", queue.HistoryFine, int(queue.HistoryFineSpan / queue.HistoryFine)},
	{"day", "last day", queue.HistoryCoarse, int(queue.HistoryCoarseSpan / queue.HistoryCoarse)},
}

// Bucket names the range's bucket: "10 s", "1 min".
func (r chartRange) Bucket() string { return stepText(r.Step) }

// rangeNamed returns the range called name ("" is the default), or false.
func rangeNamed(name string) (chartRange, bool) {
	if name == "" {
		return chartRanges[0], true
	}
	for _, r := range chartRanges {
		if r.Name == name {
			return r, true
		}
	}
	return chartRange{}, false
}

// queueCharts are the queue page's charts, drawn from its history in
// Redis (queue.Client.History): every dashboard shows the same past,
// from before it started.
type queueCharts struct {
	Range  chartRange
	Ranges []chartRange
	// Since is the first bucket shown when the queue's history starts
	// within the range (a new queue): the charts show the minutes there
	// are, not a nearly empty hour; "" when they show the whole range.
	Since      string
	Throughput plot // done and failed per second
	Dead       plot // new dead letters per bucket; the dead letters held on the right axis
	Handler    plot // handler run time p50 and p99, ms
	Wait       plot // queue wait p50 and p99, ms
	Depth      plot // tasks by state, as sampled
}

// minShown is the fewest buckets a chart shows when it leaves out the
// empty start of a range: 5 minutes of 10 s buckets, half an hour of
// 1 min ones.
const minShown = 30

// fromFirst returns hist from its first bucket that holds anything,
// keeping at least minShown buckets, and whether it cut any.
func fromFirst(hist []queue.HistoryPoint) ([]queue.HistoryPoint, bool) {
	first := len(hist)
	for i, h := range hist {
		if h != (queue.HistoryPoint{At: h.At}) {
			first = i
			break
		}
	}
	first = max(0, min(first, len(hist)-minShown))
	return hist[first:], first > 0
}

// newQueueCharts draws the charts of hist, a range's buckets, at width
// pixels each. Buckets before the first that holds anything are left
// out (fromFirst).
func newQueueCharts(r chartRange, hist []queue.HistoryPoint, width int) queueCharts {
	hist, cut := fromFirst(hist)
	n := len(hist)
	times := make([]time.Time, n)
	col := func() []float64 { return make([]float64, n) }
	done, failed, dead, held := col(), col(), col(), col()
	hp50, hp99, wp50, wp99 := col(), col(), col(), col()
	avail, delayed, retrying, inflight := col(), col(), col(), col()
	perSec := r.Step.Seconds()
	for i, h := range hist {
		times[i] = h.At
		done[i], failed[i], dead[i] = float64(h.Done)/perSec, float64(h.Failed)/perSec, float64(h.Dead)
		// Percentiles are zero for a bucket without an attempt: no value,
		// not a run time of 0.
		hp50[i], hp99[i] = msOrGap(h.HandlerP50, h.HandlerP99)
		wp50[i], wp99[i] = msOrGap(h.WaitP50, h.WaitP99)
		if h.Sampled {
			avail[i], delayed[i], retrying[i] = float64(h.Available), float64(h.Delayed), float64(h.Retrying)
			inflight[i], held[i] = float64(h.InFlight), float64(h.DeadLetters)
		} else {
			avail[i], delayed[i], retrying[i], inflight[i], held[i] = math.NaN(), math.NaN(), math.NaN(), math.NaN(), math.NaN()
		}
	}
	per := "per " + stepText(r.Step)
	since := ""
	if cut && n > 0 {
		since = hist[0].At.UTC().Format(clockFormat)
	}
	return queueCharts{
		Range: r, Ranges: chartRanges, Since: since,
		Throughput: newPlot("chart-throughput", "Tasks done and failed", "tasks/s", "", width, times, []series{
			{Name: "done/s", Values: done}, {Name: "failed/s", Values: failed}}),
		Dead: newPlot("chart-dead", "Dead letters", "new "+per, "held", width, times, []series{
			{Name: "new dead letters " + per, Values: dead, Total: true}, {Name: "dead letters held", Values: held, Right: true}}),
		Handler: newPlot("chart-handler", "Handler run time", "ms", "", width, times, []series{
			{Name: "handler p50 ms", Values: hp50}, {Name: "handler p99 ms", Values: hp99}}),
		Wait: newPlot("chart-wait", "Queue wait, due to start", "ms", "", width, times, []series{
			{Name: "wait p50 ms", Values: wp50}, {Name: "wait p99 ms", Values: wp99}}),
		Depth: newPlot("chart-depth", "Tasks by state", "tasks", "", width, times, []series{
			{Name: "available", Values: avail}, {Name: "delayed", Values: delayed},
			{Name: "retrying", Values: retrying}, {Name: "in flight", Values: inflight}}),
	}
}

// msOrGap returns two percentiles in ms, or no value for a bucket that
// had no attempt (both zero).
func msOrGap(p50, p99 time.Duration) (float64, float64) {
	if p50 == 0 && p99 == 0 {
		return math.NaN(), math.NaN()
	}
	return float64(p50) / float64(time.Millisecond), float64(p99) / float64(time.Millisecond)
}

// stepText names a bucket's length: "10 s", "1 min".
func stepText(d time.Duration) string {
	if d%time.Minute == 0 {
		return fmt.Sprintf("%d min", int(d/time.Minute))
	}
	return fmt.Sprintf("%d s", int(d/time.Second))
}
