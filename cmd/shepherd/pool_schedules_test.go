package main

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/shepherd-go/shepherd/pool"
)

type fixedPlan struct{}

func (fixedPlan) Name() string { return "devices" }
func (fixedPlan) Plan(context.Context) (*pool.JobPlan, error) {
	return &pool.JobPlan{Jobs: []pool.PlannedJob{{Key: "d1"}, {Key: ""}}}, nil
}

func TestPoolSchedulesAndTickers(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	name, node, _ := livePool(t, 1, 0)
	args := func(cmd string, more ...string) []string {
		return append([]string{"pool", cmd, "-pool", name, "-redis", srv.Addr()}, more...)
	}
	code, out, msg := runCmd(args("schedules")...)
	require.Equal(t, exitOK, code, msg)
	assert.Contains(t, out, "has no schedule and no ticker")

	require.NoError(t, node.Schedule(ctx, fixedPlan{}, time.Hour))
	tk, err := node.NewTicker(ctx, "beat", time.Hour)
	require.NoError(t, err)
	defer tk.Stop()
	require.Eventually(t, func() bool {
		st, err := pool.Inspect(ctx, srv.Client(), name)
		return err == nil && len(st.Schedules) == 1 && !st.Schedules[0].LastRun.IsZero() && st.Schedules[0].Failed == 1
	}, 10*time.Second, 5*time.Millisecond)

	code, out, msg = runCmd(args("schedules")...)
	require.Equal(t, exitOK, code, msg)
	assert.Contains(t, out, "SCHEDULE")
	assert.Contains(t, out, "devices")
	assert.Contains(t, out, node.ID())
	assert.Contains(t, out, "invalid job key", "the failed key's error is shown")
	assert.Contains(t, out, "beat")
	code, out, msg = runCmd("status", "-pool", name, "-redis", srv.Addr())
	require.Equal(t, exitOK, code, msg)
	assert.Contains(t, out, "schedules: 1")
	assert.Contains(t, out, "tickers: 1")

	code, out, msg = runCmd(args("schedules", "-json")...)
	require.Equal(t, exitOK, code, msg)
	var got struct {
		Schedules []map[string]any `json:"schedules"`
		Tickers   []map[string]any `json:"tickers"`
	}
	require.NoError(t, json.Unmarshal([]byte(out), &got))
	require.Len(t, got.Schedules, 1)
	assert.EqualValues(t, 1, got.Schedules[0]["started"])
	assert.EqualValues(t, 3_600_000, got.Schedules[0]["interval_ms"])
	require.Len(t, got.Tickers, 1)
	assert.EqualValues(t, 3_600_000, got.Tickers[0]["period_ms"])

	code, out, msg = runCmd(args("unschedule", "devices")...)
	require.Equal(t, exitOK, code, msg)
	assert.Contains(t, out, "schedule devices of pool "+name+" removed")
	code, out, msg = runCmd(args("stop-ticker", "beat")...)
	require.Equal(t, exitOK, code, msg)
	assert.Contains(t, out, "removed")
	code, _, msg = runCmd(args("unschedule", "devices")...)
	assert.Equal(t, exitError, code)
	assert.Contains(t, msg, "no such schedule")
	code, _, msg = runCmd(args("stop-ticker")...)
	assert.Equal(t, exitUsage, code)
	assert.Contains(t, msg, "missing ticker name")
	code, out, _ = runCmd(args("schedules")...)
	assert.Equal(t, exitOK, code)
	assert.Contains(t, out, "has no schedule and no ticker")
}
