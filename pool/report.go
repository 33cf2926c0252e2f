package pool

import (
	"encoding/json"
	"slices"
)

// A worker reports what it runs with each keep-alive: how many jobs and
// the first few of their keys, in the alive hash beside its keep-alive
// (field "j:<id>"). The worker knows what it runs, so the dispatch
// scripts keep no counter for it; Summary reads the reports instead of
// every job record, so the views of a pool of a million jobs read a few
// hash fields. A report is as old as its keep-alive (at most WorkerTTL/3
// for a live worker); a dead worker's last report stays until the janitor
// removes the worker.

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

// reportJSON returns the report the worker's keep-alive carries: the
// count of its jobs as its loop last published it, and the keys of its
// latest report (the count cuts them: a worker whose jobs stopped since
// reports none of them). It asks the loop for a fresh report, for the
// next keep-alive.
func (w *Worker) reportJSON() string {
	select {
	case w.reportReq <- struct{}{}:
	default:
	}
	r := workerReport{Jobs: int(w.running.Load())}
	if last := w.report.Load(); last != nil {
		r.Keys = last.Keys[:min(len(last.Keys), r.Jobs)]
	}
	raw, _ := json.Marshal(r)
	return string(raw)
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
