package main

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestBenchSmoke runs every scenario once at 1% of its size on the shared
// Redis: it checks the command's output, not the numbers.
func TestBenchSmoke(t *testing.T) {
	t.Parallel()
	var out, errOut bytes.Buffer
	code := run([]string{"bench", "-redis", srv.Addr(), "-scenario", "all", "-runs", "1", "-scale", "0.01"}, &out, &errOut)
	require.Equal(t, exitOK, code, "stderr: %s", errOut.String())

	want := map[string][]string{
		"A": {"jobs_per_s", "raw_xadd_per_s", "dispatch_p50_ms", "dispatch_p99_ms", "dispatch_max_ms",
			"start_p50_ms", "start_p99_ms", "errors", "duplicate_starts"},
		"B":   {"dispatch_p50_ms", "dispatch_p99_ms", "dispatch_max_ms"},
		"C":   {"recovery_ms", "survivor_restarts"},
		"D":   {"moved_survivor_keys", "removed_jobs_elsewhere_ms"},
		"E":   {"redis_bytes_per_job", "node_rss_bytes", "jobs_per_s"},
		"R":   {"stable_identity", "starts_per_job", "max_job_gap_ms", "redis_cpu_us_per_job"},
		"T1":  {"tasks_per_s", "tasks_per_raw_xadd", "result_p50_ms", "result_p99_ms", "errors"},
		"T1P": {"tasks_per_s", "tasks_per_raw_xadd", "result_p50_ms", "result_p99_ms", "errors"},
		"T2":  {"result_p50_ms", "result_p99_ms"},
		"T3":  {"first_start_late_ms", "start_late_p99_ms"},
		"T4":  {"recovery_ms"},
		"T5":  {"b_wait_p50_ms", "b_wait_p99_ms", "run_ms", "a_waiting_when_b_done", "redis_cpu_us_per_task"},
		"T6": {"c8_settle_s", "c8_in_band_after_settle", "c8_throughput_of_best_fixed", "c8_p99_of_noload", "c8_halved_settle_s",
			"c32_settle_s", "c32_throughput_of_best_fixed", "c32_p99_of_noload", "c32_halved_settle_s", "c32_halved_in_band_after_settle",
			"c8_redis_cpu_us_per_task", "c32_redis_cpu_us_per_task", "redis_cpu_us_per_task"},
		"T6P": {"live_share_of_asked", "batch_alone_of_capacity", "live_p99_ms", "redis_cpu_us_per_task"},
		"TM":  {"bytes_per_waiting_task_1000", "bytes_per_outcome_1000"},
		"TP":  {"ticks_expected", "ticks_missed", "ticks_twice", "tick_late_p99_ms", "redis_cpu_us_per_task"},
		"TR":  {"rate_per_s", "max_window_per_s", "redis_cpu_us_per_task", "burst"},
		"TS": {"shards", "shard_masters", "tasks_per_s", "redis_cpu_us_per_task", "max_master_task_share",
			"busiest_master_cpu_us_per_task", "result_p99_ms", "errors"},
		"TW": {"shape", "replicas", "result_p50_ms", "result_p99_ms"},
	}
	for _, s := range queueScenarios {
		if s != "TM" { // TM has one per size
			want[s] = append(want[s], "redis_cpu_us_per_task")
		}
	}
	seen := map[string]bool{}
	var tsShards []float64
	lines := strings.Split(out.String(), "\n")
	for _, line := range lines {
		if !strings.HasPrefix(line, "{") {
			continue
		}
		var m map[string]any
		require.NoError(t, json.Unmarshal([]byte(line), &m), line)
		s, _ := m["scenario"].(string)
		seen[s] = true
		standalone := m["standalone"] == float64(1)
		if s == "TS" {
			tsShards = append(tsShards, m["shards"].(float64))
		}
		if s == "TS" && !standalone {
			assert.Equal(t, m["shards"], m["shard_masters"], "TS: the shards' tags land on as many masters: %s", line)
			share := m["max_master_task_share"].(float64)
			assert.True(t, share > 0.3 && share <= 1, "TS: max_master_task_share %v", share)
		}
		assert.EqualValues(t, 1, m["run"], line)
		for _, f := range want[s] {
			if standalone && strings.Contains(f, "master") {
				continue // on one Redis: no masters to compare
			}
			assert.Contains(t, m, f, "scenario %s", s)
		}
		if _, ok := m["errors"]; ok {
			assert.EqualValues(t, 0, m["errors"], line)
		}
		if _, ok := m["ticks_twice"]; ok {
			assert.EqualValues(t, 0, m["ticks_twice"], line)
		}
		if _, ok := m["duplicate_starts"]; ok {
			assert.EqualValues(t, 0, m["duplicate_starts"], line)
		}
	}
	for s := range want {
		assert.True(t, seen[s], "no JSON line for scenario %s in:\n%s", s, out.String())
	}
	assert.Equal(t, []float64{1, 3, 3}, tsShards, "TS: one line per shard count, and 3 shards on one Redis")
	assert.Contains(t, out.String(), "| TS shards=3 | tasks_per_s |")
	assert.Contains(t, out.String(), "| TS shards=3 standalone | redis_cpu_us_per_task |")
	assert.Contains(t, out.String(), "| scenario | metric | min | median | max |")
	assert.Contains(t, out.String(), "| C | survivor_restarts |")
}

// R restarts every node of a pool in turn, without and with stable
// identities: two lines a run. Without, each job starts at least twice
// (it moves away and back); with, once.
func TestBenchR(t *testing.T) {
	t.Parallel()
	var out, errOut bytes.Buffer
	code := run([]string{"bench", "-redis", srv.Addr(), "-scenario", "R", "-runs", "1", "-scale", "0.05"}, &out, &errOut)
	require.Equal(t, exitOK, code, "stderr: %s", errOut.String())
	var stable []bool
	for _, line := range strings.Split(out.String(), "\n") {
		if !strings.HasPrefix(line, "{") {
			continue
		}
		var m map[string]any
		require.NoError(t, json.Unmarshal([]byte(line), &m), line)
		assert.Equal(t, "R", m["scenario"], line)
		s, ok := m["stable_identity"].(bool)
		require.True(t, ok, "stable_identity is a JSON boolean: %s", line)
		stable = append(stable, s)
		assert.EqualValues(t, 100, m["jobs"], line)
		perJob := m["starts_per_job"].(float64)
		if s {
			assert.LessOrEqual(t, perJob, 1.05, "with identities, each job starts once: %s", line)
		} else {
			assert.GreaterOrEqual(t, perJob, 2.0, "without, each job moves away and back: %s", line)
		}
		assert.Greater(t, m["max_job_gap_ms"].(float64), 0.0, line)
		assert.Greater(t, m["redis_cpu_us_per_job"].(float64), 0.0, line)
	}
	assert.Equal(t, []bool{false, true}, stable, out.String())
	assert.Contains(t, out.String(), "| R stable_identity=true | starts_per_job |")
}

// TW runs T1's and T2's shapes on a private primary with one replica,
// without and with WithReplicas(1, 1s): four lines a run, the replicated
// ones compared with the others.
func TestBenchTW(t *testing.T) {
	t.Parallel()
	var out, errOut bytes.Buffer
	code := run([]string{"bench", "-redis", srv.Addr(), "-scenario", "TW", "-runs", "1", "-scale", "0.01"}, &out, &errOut)
	require.Equal(t, exitOK, code, "stderr: %s", errOut.String())

	type key struct {
		shape    string
		replicas float64
	}
	lines := map[key]map[string]any{}
	var order []key
	for _, line := range strings.Split(out.String(), "\n") {
		if !strings.HasPrefix(line, "{") {
			continue
		}
		var m map[string]any
		require.NoError(t, json.Unmarshal([]byte(line), &m), line)
		assert.Equal(t, "TW", m["scenario"], line)
		assert.EqualValues(t, 1, m["run"], line)
		shape, _ := m["shape"].(string)
		replicas, _ := m["replicas"].(float64)
		k := key{shape, replicas}
		assert.NotContains(t, lines, k, "two lines for %v", k)
		lines[k] = m
		order = append(order, k)
	}
	require.Equal(t, []key{{"T1", 0}, {"T1", 1}, {"T2", 0}, {"T2", 1}}, order, out.String())

	positive := func(m map[string]any, fields ...string) {
		t.Helper()
		for _, f := range fields {
			v, ok := m[f].(float64)
			if assert.True(t, ok, "%s: no number %s in %v", m["shape"], f, m) {
				assert.Greater(t, v, 0.0, "%s replicas=%v: %s", m["shape"], m["replicas"], f)
			}
		}
	}
	for _, r := range []float64{0, 1} {
		t1, t2 := lines[key{"T1", r}], lines[key{"T2", r}]
		positive(t1, "tasks_per_s", "result_p50_ms", "result_p99_ms", "submit_p50_ms", "submit_p99_ms", "redis_cpu_us_per_task")
		assert.EqualValues(t, 0, t1["errors"], "T1 replicas=%v", r)
		positive(t2, "result_p50_ms", "result_p99_ms", "redis_cpu_us_per_task")
		assert.LessOrEqual(t, t1["result_p50_ms"], t1["result_p99_ms"])
		assert.LessOrEqual(t, t2["result_p50_ms"], t2["result_p99_ms"])
	}
	positive(lines[key{"T1", 1}], "tasks_per_s_vs_none")
	assert.NotContains(t, lines[key{"T1", 0}], "tasks_per_s_vs_none")
	assert.NotContains(t, lines[key{"T2", 0}], "result_p50_ms_more")
	more, ok := lines[key{"T2", 1}]["result_p50_ms_more"].(float64)
	require.True(t, ok, "no result_p50_ms_more on T2 replicas=1")
	assert.InDelta(t, lines[key{"T2", 1}]["result_p50_ms"].(float64)-lines[key{"T2", 0}]["result_p50_ms"].(float64), more, 0.0011)
	assert.Contains(t, out.String(), "| TW T1 replicas=1 | tasks_per_s_vs_none |")
	assert.Contains(t, out.String(), "| TW T2 replicas=0 | result_p50_ms |")
}

// TF fails a Sentinel group over under a queue's load, each kind of
// failover without and with WithReplicas(1): one line per (kind,
// replicas), and with replicas nothing acknowledged is lost or undone.
func TestBenchTF(t *testing.T) {
	t.Parallel()
	var out, errOut bytes.Buffer
	code := run([]string{"bench", "-redis", srv.Addr(), "-scenario", "TF", "-runs", "1", "-scale", "0.01"}, &out, &errOut)
	require.Equal(t, exitOK, code, "stderr: %s", errOut.String())

	type key struct {
		kind     string
		replicas float64
	}
	lines := map[key]map[string]any{}
	var order, want []key
	for _, kind := range tfKinds {
		want = append(want, key{kind, 0}, key{kind, 1})
	}
	for _, line := range strings.Split(out.String(), "\n") {
		if !strings.HasPrefix(line, "{") {
			continue
		}
		var m map[string]any
		require.NoError(t, json.Unmarshal([]byte(line), &m), line)
		assert.Equal(t, "TF", m["scenario"], line)
		assert.EqualValues(t, 1, m["run"], line)
		kind, _ := m["kind"].(string)
		replicas, _ := m["replicas"].(float64)
		k := key{kind, replicas}
		assert.NotContains(t, lines, k, "two lines for %v", k)
		lines[k] = m
		order = append(order, k)
	}
	require.Equal(t, want, order, out.String())

	for _, k := range want {
		m := lines[k]
		num := func(f string) float64 {
			t.Helper()
			v, ok := m[f].(float64)
			assert.True(t, ok, "%v: no number %s in %v", k, f, m)
			return v
		}
		t.Logf("%v: %v", k, m)
		assert.Greater(t, num("acked"), 0.0, "%v", k)
		for _, f := range []string{"acked_lost", "results_undone", "failed_submits_ran", "failed_submits"} {
			assert.GreaterOrEqual(t, num(f), 0.0, "%v: %s", k, f)
		}
		assert.LessOrEqual(t, num("acked_lost"), num("acked"), "%v", k)
		assert.Greater(t, num("result_p50_before_ms"), 0.0, "%v", k)
		assert.Greater(t, num("switch_ms"), 0.0, "%v", k)
		assert.Greater(t, num("recovery_ms"), 0.0, "%v: no Submit after the fault got a result", k)
		assert.Greater(t, num("recovery_after_switch_ms"), 0.0, "%v: no Submit after the switch got a result", k)
		if n := num("results_after_switch"); n > 0 {
			assert.Greater(t, num("result_p99_after_switch_ms"), 0.0, "%v", k)
		} else {
			assert.EqualValues(t, -1, num("result_p99_after_switch_ms"), "%v: no results after the switch, no p99", k)
		}
		if k.replicas == 0 {
			assert.Greater(t, num("results_after_switch"), 0.0, "%v: without replicas the new master serves at once", k)
		} else {
			// WithReplicas's guarantees.
			assert.Zero(t, num("acked_lost"), "%v: acknowledged tasks lost", k)
			assert.Zero(t, num("results_undone"), "%v: results undone", k)
		}
	}
	assert.Contains(t, out.String(), "| TF kind=behind replicas=1 | acked_lost |")
}

func TestBenchUsage(t *testing.T) {
	t.Parallel()
	for _, args := range [][]string{
		{"bench", "-scenario", "Z"},
		{"bench", "-scenario", "T9"},
		{"bench", "-scenario", "T6X"},
		{"bench", "-runs", "0"},
		{"bench", "-scale", "-1"},
		{"bench", "-raw", "nope"},
		{"bench", "-scenario", "PS", "-shards", "0"},
		{"bench", "-scenario", "PS", "-shards", "1,-3"},
		{"bench", "-scenario", "PS", "-shards", "x"},
		{"bench", "extra"},
	} {
		var out, errOut bytes.Buffer
		assert.Equal(t, exitUsage, run(args, &out, &errOut), "%v", args)
	}
	var out, errOut bytes.Buffer
	assert.Equal(t, exitOK, run([]string{"bench", "-h"}, &out, &errOut))
	assert.Contains(t, out.String(), "-scenario")
}

// M dispatches a mass of jobs over 8 worker processes and SIGKILLs one:
// every job of the killed process starts in another.
func TestBenchM(t *testing.T) {
	t.Parallel()
	var out, errOut bytes.Buffer
	code := run([]string{"bench", "-redis", srv.Addr(), "-scenario", "M", "-runs", "1", "-scale", "0.005"}, &out, &errOut)
	require.Equal(t, exitOK, code, "stderr: %s", errOut.String())
	lines := 0
	for _, line := range strings.Split(out.String(), "\n") {
		if !strings.HasPrefix(line, "{") {
			continue
		}
		lines++
		var m map[string]any
		require.NoError(t, json.Unmarshal([]byte(line), &m), line)
		assert.Equal(t, "M", m["scenario"], line)
		assert.EqualValues(t, 500, m["jobs"], line)
		for _, f := range []string{"jobs_per_s", "redis_cpu_us_per_job", "victim_jobs", "recovery_ms", "recovery_p99_ms"} {
			assert.Greater(t, m[f].(float64), 0.0, "%s: %s", f, line)
		}
		assert.GreaterOrEqual(t, m["recovery_ms"].(float64), m["recovery_p99_ms"].(float64), line)
	}
	assert.Equal(t, 1, lines, out.String())
}

// PS runs scenario A on a private 3-master Redis Cluster, one line per
// shard count, each saying how the jobs and the Redis CPU spread over
// the masters; then the same counts on the bench's standalone Redis.
func TestBenchPS(t *testing.T) {
	t.Parallel()
	var out, errOut bytes.Buffer
	code := run([]string{"bench", "-redis", srv.Addr(), "-scenario", "PS", "-runs", "1", "-scale", "0.02"}, &out, &errOut)
	require.Equal(t, exitOK, code, "stderr: %s", errOut.String())
	var shards, standalone []float64
	for _, line := range strings.Split(out.String(), "\n") {
		if !strings.HasPrefix(line, "{") {
			continue
		}
		var m map[string]any
		require.NoError(t, json.Unmarshal([]byte(line), &m), line)
		assert.Equal(t, "PS", m["scenario"], line)
		assert.EqualValues(t, 400, m["jobs"], line)
		assert.EqualValues(t, 0, m["errors"], line)
		assert.EqualValues(t, 0, m["duplicate_starts"], line)
		for _, f := range []string{"jobs_per_s", "redis_cpu_us_per_job", "script_calls_per_job"} {
			assert.Greater(t, m[f].(float64), 0.0, "%s: %s", f, line)
		}
		n := m["shards"].(float64)
		if m["standalone"] == float64(1) {
			standalone = append(standalone, n)
			assert.NotContains(t, m, "max_master_job_share", line)
			continue
		}
		shards = append(shards, n)
		assert.Equal(t, n, m["shard_masters"], "the shards' tags land on as many masters: %s", line)
		assert.Greater(t, m["busiest_master_cpu_us_per_job"].(float64), 0.0, line)
		share := m["max_master_job_share"].(float64)
		if n == 1 {
			assert.EqualValues(t, 1, share, "one shard: every job on one master: %s", line)
		} else {
			assert.True(t, share >= 1/n && share < 1, "max_master_job_share %v at %v shards", share, n)
			assert.Greater(t, m["busiest_master_vs_first"].(float64), 0.0, line)
		}
	}
	assert.Equal(t, psShardsWant, shards, "one line per shard count, in order: %s", out.String())
	assert.Equal(t, psShardsWant, standalone, "then each on one Redis: %s", out.String())
	assert.Contains(t, out.String(), "| PS shards=3 | max_master_job_share |")
	assert.Contains(t, out.String(), "| PS shards=3 standalone | script_calls_per_job |")
}

// psShardsWant are the shard counts PS measures by default.
var psShardsWant = []float64{1, 3}
