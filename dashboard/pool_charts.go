package dashboard

import (
	"math"
	"time"

	"github.com/shepherd-go/shepherd/pool"
)

// poolHistoryPoint is a sample of a pool's history in the page's JSON
// twin, in the CLI's style.
type poolHistoryPoint struct {
	At           time.Time `json:"at"`
	Jobs         int64     `json:"jobs"`
	Queued       int64     `json:"queued"`
	Pending      int64     `json:"pending"`
	Workers      int64     `json:"workers"`
	Started      int64     `json:"started"`
	StartsFailed int64     `json:"starts_failed"`
	Recovered    int64     `json:"recovered"`
}

// poolCharts are a pool's page's charts, drawn from the history its
// janitor keeps in Redis (pool.History): every dashboard shows the same
// past, from before it started.
type poolCharts struct {
	// Since is the first sample's time when the history starts within
	// the hour (fromFirst's rule); "" when the charts show the hour.
	Since  string
	Jobs   plot // jobs, queued, pending; workers on the right axis
	Starts plot // Starts, failed Starts, recoveries per step
}

// poolBuckets is how many HistoryStep buckets a pool's charts span.
const poolBuckets = int(pool.HistorySpan / pool.HistoryStep)

// newPoolCharts draws hist (oldest first) on a grid of HistoryStep
// buckets ending at now, at width pixels; a bucket without a sample is
// a gap. Counters become what happened in the bucket: the difference
// with the sample before it, a gap without one.
func newPoolCharts(hist []pool.HistoryPoint, now time.Time, width int) poolCharts {
	step := pool.HistoryStep
	end := now.Truncate(step)
	start := end.Add(-time.Duration(poolBuckets-1) * step)
	at := make([]*pool.HistoryPoint, poolBuckets)
	first := poolBuckets
	for i := range hist {
		b := int(hist[i].At.Sub(start) / step)
		if hist[i].At.Before(start) || b >= poolBuckets {
			continue
		}
		at[b] = &hist[i]
		first = min(first, b)
	}
	first = max(0, min(first, poolBuckets-minShown))
	n := poolBuckets - first
	times := make([]time.Time, n)
	nan := func() []float64 {
		v := make([]float64, n)
		for i := range v {
			v[i] = math.NaN()
		}
		return v
	}
	jobs, queued, pending, workers := nan(), nan(), nan(), nan()
	started, failed, recovered := nan(), nan(), nan()
	for i := range n {
		b := first + i
		times[i] = start.Add(time.Duration(b) * step)
		p := at[b]
		if p == nil {
			continue
		}
		jobs[i], queued[i], pending[i], workers[i] = float64(p.Jobs), float64(p.Queued), float64(p.Pending), float64(p.Workers)
		if b == 0 || at[b-1] == nil {
			continue
		}
		q := at[b-1]
		// A counter that went down was reset (the pool was shut down and
		// made anew): no value rather than a negative one.
		delta := func(a, b int64) float64 {
			if a < b {
				return math.NaN()
			}
			return float64(a - b)
		}
		started[i], failed[i], recovered[i] = delta(p.Started, q.Started), delta(p.StartsFailed, q.StartsFailed), delta(p.Recovered, q.Recovered)
	}
	c := poolCharts{
		Jobs: newPlot("chart-pool-jobs", "Jobs, queue and workers", "jobs", "workers", width, times, []series{
			{Name: "jobs", Values: jobs}, {Name: "queued", Values: queued}, {Name: "pending", Values: pending},
			{Name: "workers", Values: workers, Right: true}}),
		Starts: newPlot("chart-pool-starts", "Starts and recoveries", "per "+stepText(step), "", width, times, []series{
			{Name: "started", Values: started, Total: true}, {Name: "starts failed", Values: failed, Total: true},
			{Name: "recovered", Values: recovered, Total: true}}),
	}
	if first > 0 {
		c.Since = times[0].UTC().Format(clockFormat)
	}
	return c
}
