package main

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/shepherd-go/shepherd/internal/jsonstyle"
	"github.com/shepherd-go/shepherd/queue"
)

// TestQueuePauseResumeCommands: queue pause stores the pause (stats
// shows it, and a task submitted meanwhile waits), queue resume ends it
// and the task runs.
func TestQueuePauseResumeCommands(t *testing.T) {
	t.Parallel()
	name, ctx, q := openQueue(t)
	started := make(chan string, 1)
	_, err := q.Serve(func(ctx context.Context, t *queue.Task) ([]byte, error) {
		started <- t.ID
		return nil, nil
	}, queue.WithWorkers(1))
	require.NoError(t, err)
	r := func(args ...string) (int, string, string) {
		return runCmd(append(append([]string{"queue"}, args...), "-queue", name, "-redis", srv.Addr())...)
	}

	code, out, errOut := r("stats")
	require.Equal(t, exitOK, code, errOut)
	assert.Contains(t, out, "\nstarts: running; rate none\n")

	code, out, errOut = r("pause")
	require.Equal(t, exitOK, code, errOut)
	assert.Equal(t, "queue "+name+" paused: tasks in flight finish, none starts until queue resume\n", out)
	st, err := q.Stats(ctx)
	require.NoError(t, err)
	assert.True(t, st.Paused, "the pause is stored with the queue")
	code, out, errOut = r("stats")
	require.Equal(t, exitOK, code, errOut)
	assert.Contains(t, out, "\nstarts: PAUSED (no task starts until queue resume); rate none\n")
	code, out, errOut = r("stats", "-json")
	require.Equal(t, exitOK, code, errOut)
	v := checkJSONStyle(t, "queue stats", out)
	assert.Equal(t, true, jsonstyle.At(v, "paused"))
	assert.Nil(t, jsonstyle.At(v, "rate"), "no limit is null")
	code, out, errOut = r("pause", "-json")
	require.Equal(t, exitOK, code, "pausing a paused queue: %s", errOut)
	assert.JSONEq(t, `{"queue":"`+name+`","paused":true}`, out)

	f, err := q.Submit(ctx, []byte("x"), queue.WithTaskID("while-paused"))
	require.NoError(t, err)
	st, err = q.Stats(ctx)
	require.NoError(t, err)
	assert.EqualValues(t, 1, st.Available, "the task waits while the queue is paused")

	code, out, errOut = r("resume")
	require.Equal(t, exitOK, code, errOut)
	assert.Equal(t, "queue "+name+" resumed\n", out)
	select {
	case id := <-started:
		assert.Equal(t, "while-paused", id)
	case <-time.After(10 * time.Second):
		t.Fatal("the task did not start after queue resume")
	}
	_, err = f.Wait(ctx)
	require.NoError(t, err)
	code, out, errOut = r("resume", "-json")
	require.Equal(t, exitOK, code, errOut)
	assert.JSONEq(t, `{"queue":"`+name+`","paused":false}`, out)
	code, out, errOut = r("stats", "-json")
	require.Equal(t, exitOK, code, errOut)
	assert.Equal(t, false, jsonstyle.At(checkJSONStyle(t, "queue stats", out), "paused"))

	code, _, errOut = r("pause", "extra")
	assert.Equal(t, exitUsage, code, errOut)
	assert.Contains(t, errOut, "unexpected arguments")
	code, _, errOut = runCmd("queue", "pause", "-queue", "no-such-"+name, "-redis", srv.Addr())
	assert.Equal(t, exitError, code)
	assert.Contains(t, errOut, "not found")
}

// TestQueueRateCommand: queue rate shows the rate, sets it (burst in
// effect included) and removes it with none; malformed, zero or negative
// rates are usage errors that change nothing.
func TestQueueRateCommand(t *testing.T) {
	t.Parallel()
	name, ctx, q := openQueue(t)
	r := func(args ...string) (int, string, string) {
		return runCmd(append(append([]string{"queue", "rate"}, args...), "-queue", name, "-redis", srv.Addr())...)
	}

	code, out, errOut := r()
	require.Equal(t, exitOK, code, errOut)
	assert.Equal(t, "queue "+name+": rate none\n", out)
	code, out, errOut = r("-json")
	require.Equal(t, exitOK, code, errOut)
	assert.JSONEq(t, `{"queue":"`+name+`","rate":null}`, out)

	code, out, errOut = r("500/1s")
	require.Equal(t, exitOK, code, errOut)
	assert.Equal(t, "queue "+name+": rate 500/1s, burst 10\n", out, "the default burst is N/50")
	st, err := q.Stats(ctx)
	require.NoError(t, err)
	assert.Equal(t, queue.Rate{N: 500, Per: time.Second}, st.Rate)
	code, out, errOut = r("-json")
	require.Equal(t, exitOK, code, errOut)
	assert.JSONEq(t, `{"queue":"`+name+`","rate":{"n":500,"per_ms":1000,"burst":10}}`, out)
	code, out, errOut = runCmd("queue", "stats", "-queue", name, "-redis", srv.Addr())
	require.Equal(t, exitOK, code, errOut)
	assert.Contains(t, out, "\nstarts: running; rate 500/1s, burst 10\n")

	code, out, errOut = r("-json", "100/1m+7")
	require.Equal(t, exitOK, code, errOut)
	assert.JSONEq(t, `{"queue":"`+name+`","rate":{"n":100,"per_ms":60000,"burst":7}}`, out)
	code, out, errOut = runCmd("queue", "stats", "-queue", name, "-redis", srv.Addr(), "-json")
	require.Equal(t, exitOK, code, errOut)
	v := checkJSONStyle(t, "queue stats", out)
	assert.Equal(t, map[string]any{"n": 100.0, "per_ms": 60000.0, "burst": 7.0}, jsonstyle.At(v, "rate"))

	for _, bad := range []struct{ rate, want string }{
		{"0", "ambiguous"},
		{"", "ambiguous"},
		{"fast", "want N/DURATION"},
		{"0/1s", "1 to"},
		{"-5/1s", "1 to"},
		{"500/0s", "period"},
		{"500/-1s", "period"},
		{"500/1.5ms", "whole milliseconds"},
		{"500/1s+0", "burst"},
		{"500/1s+501", "burst"},
		{"500/soon", "invalid duration"},
	} {
		code, out, errOut = r(bad.rate)
		assert.Equal(t, exitUsage, code, "%q: %s", bad.rate, errOut)
		assert.Empty(t, out, bad.rate)
		assert.Contains(t, errOut, bad.want, bad.rate)
		assert.Contains(t, errOut, "Usage:", bad.rate)
		code, _, errOut = r(bad.rate, "-json")
		assert.Equal(t, exitUsage, code, "%q -json: %s", bad.rate, errOut)
		assert.Contains(t, jsonError(t, bad.rate, errOut), bad.want)
	}
	code, _, errOut = r("5/1s", "6/1s")
	assert.Equal(t, exitUsage, code, errOut)
	assert.Contains(t, errOut, "unexpected arguments")
	st, err = q.Stats(ctx)
	require.NoError(t, err)
	assert.Equal(t, queue.Rate{N: 100, Per: time.Minute, Burst: 7}, st.Rate, "no bad rate changed it")

	code, out, errOut = r("none")
	require.Equal(t, exitOK, code, errOut)
	assert.Equal(t, "queue "+name+": rate none\n", out)
	st, err = q.Stats(ctx)
	require.NoError(t, err)
	assert.True(t, st.Rate.IsZero(), "none removes the rate")
}

// TestTenantsPauseResumeRateCommands: tenants pause, resume and rate
// act on one tenant; tenants ls shows its rate and pause; an unknown
// tenant is an error (exit 1), a malformed rate a usage error (exit 2).
func TestTenantsPauseResumeRateCommands(t *testing.T) {
	t.Parallel()
	name, ctx, q := openQueue(t)
	require.NoError(t, q.SetTenant(ctx, "acme", 3))
	require.NoError(t, q.SetTenant(ctx, "bolt", 2))
	r := func(args ...string) (int, string, string) {
		return runCmd(append(append([]string{"tenants"}, args...), "-queue", name, "-redis", srv.Addr())...)
	}
	tenant := func(id string) queue.TenantInfo {
		t.Helper()
		ts, err := q.Tenants(ctx)
		require.NoError(t, err)
		for _, ti := range ts {
			if ti.ID == id {
				return ti
			}
		}
		t.Fatalf("no tenant %s", id)
		return queue.TenantInfo{}
	}

	code, out, errOut := r("pause", "acme")
	require.Equal(t, exitOK, code, errOut)
	assert.Equal(t, "acme: paused\n", out)
	assert.True(t, tenant("acme").Paused)
	assert.False(t, tenant("bolt").Paused, "one tenant only")
	code, out, errOut = r("rate", "acme", "50/1s")
	require.Equal(t, exitOK, code, errOut)
	assert.Equal(t, "acme: rate 50/1s, burst 1\n", out)
	assert.Equal(t, queue.Rate{N: 50, Per: time.Second}, tenant("acme").Rate)

	code, out, errOut = r("ls")
	require.Equal(t, exitOK, code, errOut)
	assert.Regexp(t, `TENANT\s+CAPACITY\s+LOAD\s+WAITING\s+UNFINISHED\s+RATE\s+PAUSED\n`, out)
	assert.Regexp(t, `acme\s+3\s+0\s+0\s+0\s+50/1s, burst 1\s+paused\n`, out)
	assert.Regexp(t, `bolt\s+2\s+0\s+0\s+0\s+-\s+-\n`, out)
	code, out, errOut = r("ls", "-json")
	require.Equal(t, exitOK, code, errOut)
	v := checkJSONStyle(t, "tenants ls", out)
	require.Len(t, v, 2)
	acme, bolt := v.([]any)[0], v.([]any)[1]
	assert.Equal(t, true, jsonstyle.At(acme, "paused"))
	assert.Equal(t, map[string]any{"n": 50.0, "per_ms": 1000.0, "burst": 1.0}, jsonstyle.At(acme, "rate"))
	assert.Equal(t, false, jsonstyle.At(bolt, "paused"))
	assert.Nil(t, jsonstyle.At(bolt, "rate"))

	code, out, errOut = r("rate", "acme")
	require.Equal(t, exitOK, code, errOut)
	assert.Equal(t, "acme: rate 50/1s, burst 1\n", out)
	code, out, errOut = r("rate", "acme", "-json")
	require.Equal(t, exitOK, code, errOut)
	assert.JSONEq(t, `{"tenant":"acme","rate":{"n":50,"per_ms":1000,"burst":1}}`, out)
	code, out, errOut = r("rate", "acme", "none", "-json")
	require.Equal(t, exitOK, code, errOut)
	assert.JSONEq(t, `{"tenant":"acme","rate":null}`, out)
	assert.True(t, tenant("acme").Rate.IsZero())

	code, out, errOut = r("resume", "acme", "-json")
	require.Equal(t, exitOK, code, errOut)
	assert.JSONEq(t, `[{"id":"acme","done":"resumed"}]`, out)
	assert.False(t, tenant("acme").Paused)

	// Unknown tenants: errors, exit 1, nothing created.
	code, out, _ = r("pause", "acme", "nobody")
	assert.Equal(t, exitError, code)
	assert.Contains(t, out, "acme: paused")
	assert.Contains(t, out, `nobody: queue: unknown tenant: "nobody"`)
	code, out, _ = r("resume", "nobody", "-json")
	assert.Equal(t, exitError, code)
	assert.JSONEq(t, `[{"id":"nobody","error":"queue: unknown tenant: \"nobody\""}]`, out)
	for _, args := range [][]string{{"rate", "nobody"}, {"rate", "nobody", "5/1s"}} {
		code, _, errOut = r(args...)
		assert.Equal(t, exitError, code, "%v: %s", args, errOut)
		assert.Contains(t, errOut, `unknown tenant: "nobody"`, args)
		code, _, errOut = r(append(args, "-json")...)
		assert.Equal(t, exitError, code, "%v: %s", args, errOut)
		assert.Contains(t, jsonError(t, strings.Join(args, " "), errOut), `unknown tenant: "nobody"`)
	}
	ts, err := q.Tenants(ctx)
	require.NoError(t, err)
	assert.Len(t, ts, 2, "no tenant was made up")

	// Usage errors: exit 2.
	for _, args := range [][]string{{"pause"}, {"resume"}, {"rate"}, {"rate", "acme", "0"}, {"rate", "acme", "x/1s"},
		{"rate", "acme", "-1/1s"}, {"rate", "acme", "5/1s", "extra"}} {
		code, _, errOut = r(args...)
		assert.Equal(t, exitUsage, code, "%v: %s", args, errOut)
	}
	assert.True(t, tenant("acme").Rate.IsZero(), "no bad rate was set")
}

// TestQueueListAndInspectShowPriority: queue ls and queue inspect show a
// task's priority, in text and JSON.
func TestQueueListAndInspectShowPriority(t *testing.T) {
	t.Parallel()
	name, ctx, q := openQueue(t)
	for id, p := range map[string]int{"low": 0, "high": 9} {
		_, err := q.Submit(ctx, []byte(id), queue.WithTaskID(id), queue.WithPriority(p))
		require.NoError(t, err)
	}
	code, out, errOut := runCmd("queue", "ls", "-queue", name, "-redis", srv.Addr())
	require.Equal(t, exitOK, code, errOut)
	assert.Regexp(t, `ID\s+STATE\s+PRIORITY\s+ATTEMPT\s+DUE`, out)
	assert.Regexp(t, `\nhigh\s+waiting\s+9\s+0/25\s`, out)
	assert.Regexp(t, `\nlow\s+waiting\s+0\s+0/25\s`, out)
	code, out, errOut = runCmd("queue", "ls", "-queue", name, "-redis", srv.Addr(), "-json")
	require.Equal(t, exitOK, code, errOut)
	var rows []taskRow
	require.NoError(t, json.Unmarshal([]byte(out), &rows))
	got := map[string]int{}
	for _, r := range rows {
		got[r.ID] = r.Priority
	}
	assert.Equal(t, map[string]int{"low": 0, "high": 9}, got)

	code, out, errOut = runCmd("queue", "inspect", "-queue", name, "-redis", srv.Addr(), "high")
	require.Equal(t, exitOK, code, errOut)
	assert.Regexp(t, `\npriority:\s+9\n`, out)
	code, out, errOut = runCmd("queue", "inspect", "-queue", name, "-redis", srv.Addr(), "-json", "high")
	require.Equal(t, exitOK, code, errOut)
	assert.Equal(t, 9.0, jsonstyle.At(checkJSONStyle(t, "queue inspect", out), "priority"))
}
