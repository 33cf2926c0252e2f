package main

import (
	"encoding/json"
	"fmt"
	"io"
	"math"
	"slices"
	"sort"
	"time"
)

// result is one run of one scenario: its metrics under the names the
// issue fixed, so that scripts can compare runs.
type result struct {
	Scenario string
	Run      int
	// Variant names one of several results a scenario measures in one
	// run ("shards=3" for TS), "" for most; the summary keeps variants
	// apart. The JSON line carries what tells them apart as metrics (or
	// Labels).
	Variant string
	Metrics map[string]float64
	// Labels are string fields of the JSON line (TW's "shape"); most
	// results have none.
	Labels map[string]string
	// Flags are boolean fields of the JSON line (R's "stable_identity").
	Flags map[string]bool
	// more are the run's further variants, printed after this result.
	more []result
}

func newResult() result { return result{Metrics: map[string]float64{}} }

func (r *result) set(name string, v float64) { r.Metrics[name] = v }

// setMs records d in milliseconds, with microsecond precision.
func (r *result) setMs(name string, d time.Duration) {
	r.Metrics[name] = math.Round(float64(d.Microseconds())) / 1000
}

// label sets the string field name of the JSON line.
func (r *result) label(name, v string) {
	if r.Labels == nil {
		r.Labels = map[string]string{}
	}
	r.Labels[name] = v
}

// flag sets the boolean field name of the JSON line.
func (r *result) flag(name string, v bool) {
	if r.Flags == nil {
		r.Flags = map[string]bool{}
	}
	r.Flags[name] = v
}

// MarshalJSON writes one flat object: scenario, run, the labels, the
// flags and the metrics.
func (r result) MarshalJSON() ([]byte, error) {
	m := make(map[string]any, len(r.Metrics)+len(r.Labels)+len(r.Flags)+2)
	for k, v := range r.Labels {
		m[k] = v
	}
	for k, v := range r.Flags {
		m[k] = v
	}
	for k, v := range r.Metrics {
		m[k] = v
	}
	m["scenario"] = r.Scenario
	m["run"] = r.Run
	return json.Marshal(m)
}

// latencies collects durations and reports percentiles.
type latencies []time.Duration

// pct returns the p-th percentile (0 < p ≤ 100) by nearest rank.
func (l latencies) pct(p float64) time.Duration {
	if len(l) == 0 {
		return 0
	}
	s := slices.Clone(l)
	slices.Sort(s)
	i := int(math.Ceil(p/100*float64(len(s)))) - 1
	return s[min(max(i, 0), len(s)-1)]
}

// writeSummary prints a markdown table with min/median/max of every
// metric of every scenario over its runs.
func writeSummary(w io.Writer, all []result) {
	fmt.Fprintln(w, "| scenario | metric | min | median | max |")
	fmt.Fprintln(w, "| --- | --- | ---: | ---: | ---: |")
	var order []string
	byScenario := map[string][]result{}
	for _, r := range all {
		key := r.Scenario
		if r.Variant != "" {
			key += " " + r.Variant
		}
		if _, ok := byScenario[key]; !ok {
			order = append(order, key)
		}
		byScenario[key] = append(byScenario[key], r)
	}
	for _, s := range order {
		runs := byScenario[s]
		names := make([]string, 0, len(runs[0].Metrics))
		for k := range runs[0].Metrics {
			names = append(names, k)
		}
		sort.Strings(names)
		for _, name := range names {
			var vs []float64
			for _, r := range runs {
				if v, ok := r.Metrics[name]; ok {
					vs = append(vs, v)
				}
			}
			slices.Sort(vs)
			fmt.Fprintf(w, "| %s | %s | %s | %s | %s |\n", s, name,
				num(vs[0]), num(vs[(len(vs)-1)/2]), num(vs[len(vs)-1]))
		}
	}
}

// num formats a metric: integers plainly, small values with precision.
func num(v float64) string {
	switch {
	case v == math.Trunc(v) && math.Abs(v) < 1e15:
		return fmt.Sprintf("%.0f", v)
	case math.Abs(v) >= 100:
		return fmt.Sprintf("%.0f", v)
	case math.Abs(v) >= 1:
		return fmt.Sprintf("%.2f", v)
	default:
		return fmt.Sprintf("%.3f", v)
	}
}
