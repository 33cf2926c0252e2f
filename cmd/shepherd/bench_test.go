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

func TestBenchUsage(t *testing.T) {
	t.Parallel()
	for _, args := range [][]string{
		{"bench", "-scenario", "Z"},
		{"bench", "-scenario", "T9"},
		{"bench", "-scenario", "T6X"},
		{"bench", "-runs", "0"},
		{"bench", "-scale", "-1"},
		{"bench", "-raw", "nope"},
		{"bench", "extra"},
	} {
		var out, errOut bytes.Buffer
		assert.Equal(t, exitUsage, run(args, &out, &errOut), "%v", args)
	}
	var out, errOut bytes.Buffer
	assert.Equal(t, exitOK, run([]string{"bench", "-h"}, &out, &errOut))
	assert.Contains(t, out.String(), "-scenario")
}
