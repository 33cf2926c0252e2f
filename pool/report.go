package pool

import (
	"encoding/json"
	"slices"
	"time"
)

// A worker reports what it runs with each keep-alive: how many jobs and
// the first few of their keys, in the alive hash beside its keep-alive
// (field "j:<id>"). The worker knows what it runs, so the dispatch
// scripts keep no counter for it; Summary reads the reports instead of
// every job record, so the views of a pool of a million jobs read a few
// hash fields. A report is as old as its keep-alive (at most WorkerTTL/3
// for a live worker): the keep-alive asks each worker's loop for it and
// waits up to reportWait, so its count and keys are of one moment. A dead
// worker's last report stays until the janitor removes the worker.

// reportKeys is how many of its job keys a worker reports: the first, in
// key order.
const reportKeys = 8

// workerReport is a worker's report (JSON in the alive hash).
type workerReport struct {
	// Jobs counts the jobs the worker runs: their Start succeeded, and
	// they are not stopped yet.
	Jobs int `json:"j"`
	// Keys are the first reportKeys of their keys, sorted.
	Keys []string `json:"k,omitempty"`
}

// reportField is the alive hash's field of worker id's report.
func reportField(id string) string { return "j:" + id }

// publishReport, on the worker's loop (which owns w.jobs), publishes the
// worker's report for its next keep-alive: O(jobs) once a keep-alive.
func (w *Worker) publishReport() {
	w.report.Store(&workerReport{Jobs: len(w.jobs), Keys: firstKeys(w.jobs, reportKeys)})
}

// askReport asks the worker's loop for a fresh report; the channel it
// returns is closed once the loop published it (nil when an earlier ask
// is still waiting: its answer will do).
func (w *Worker) askReport() <-chan struct{} {
	published := make(chan struct{})
	select {
	case w.reportReq <- published:
		return published
	default:
		return nil
	}
}

// reportJSON returns the report the worker's keep-alive carries. When
// the loop published the one asked for (fresh), it is that report, its
// count and keys of one moment. Otherwise (the loop was busy, in a Stop
// for instance) it is the count the loop last stored and the keys of its
// latest report, cut to that count (a worker whose jobs stopped since
// reports none of them).
func (w *Worker) reportJSON(fresh bool) string {
	var r workerReport
	last := w.report.Load()
	if fresh && last != nil {
		r = *last
	} else {
		r.Jobs = int(w.running.Load())
		if last != nil {
			r.Keys = last.Keys[:min(len(last.Keys), r.Jobs)]
		}
	}
	raw, _ := json.Marshal(r)
	return string(raw)
}

// reportWait is how long a keep-alive waits for its workers' fresh
// reports, at most: a loop busy for longer sends its last one. It is a
// twentieth of the keep-alive's period (whose deadline the call shares),
// and 50 ms at most.
func (c nodeConfig) reportWait() time.Duration {
	return min(50*time.Millisecond, c.keepAliveEvery()/20)
}

// parseReport reads a worker's report; ok is false when raw is none.
func parseReport(raw string) (workerReport, bool) {
	var r workerReport
	if raw == "" || json.Unmarshal([]byte(raw), &r) != nil {
		return workerReport{}, false
	}
	return r, true
}

// firstKeys returns the k smallest keys of m, sorted, in one pass.
func firstKeys(m map[string]header, k int) []string {
	out := make([]string, 0, k)
	for key := range m {
		if len(out) == k && key >= out[k-1] {
			continue
		}
		i, _ := slices.BinarySearch(out, key)
		if len(out) < k {
			out = slices.Insert(out, i, key)
			continue
		}
		copy(out[i+1:], out[i:k-1])
		out[i] = key
	}
	return out
}
