package main

import (
	"encoding/json"
	"io"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/shepherd-go/shepherd/internal/jsonstyle"
	"github.com/shepherd-go/shepherd/queue"
)

// checkJSONStyle checks that out is one JSON value in the CLI's style
// and returns it: every key snake_case, no duration in a unit other than
// ms, every time RFC 3339 in UTC.
func checkJSONStyle(t *testing.T, what, out string) any {
	t.Helper()
	v, bad, err := jsonstyle.Violations([]byte(out))
	require.NoError(t, err, "%s: %s", what, out)
	assert.Empty(t, bad, "%s: not in the JSON style", what)
	return v
}

// TestJSONStyle runs every command that has -json and checks that all of
// them print the one style: snake_case keys, durations in ms under keys
// ending in _ms, times in RFC 3339 UTC.
func TestJSONStyle(t *testing.T) {
	t.Parallel()
	poolName, _, _ := livePool(t, 2, 3)
	qName, ctx, q := openQueue(t)
	deadAndDelayed(t, ctx, q, 2*time.Millisecond) // handler run times to report
	c, err := queue.NewClient(srv.Client(), qName)
	require.NoError(t, err)
	require.NoError(t, c.SetTenant(ctx, "acme", 3))
	require.NoError(t, c.SetRate(ctx, queue.Rate{N: 500, Per: time.Second}))
	require.NoError(t, c.SetTenantRate(ctx, "acme", queue.Rate{N: 50, Per: time.Second}))
	require.Eventually(t, func() bool { // the keep-alive that carries the handler's run times
		st, err := c.Stats(ctx)
		return err == nil && len(st.Processes) == 1 && st.Processes[0].Sampled > 0
	}, 10*time.Second, 20*time.Millisecond)

	onPool := []string{"-pool", poolName, "-redis", srv.Addr(), "-json"}
	onQueue := []string{"-queue", qName, "-redis", srv.Addr(), "-json"}
	for _, tc := range []struct {
		args []string
		// want are paths that must hold a value, durations among them.
		want map[string]any
	}{
		{append([]string{"status"}, onPool...), map[string]any{"worker_ttl_ms": 1000.0, "time": nil, "nodes.0.age_ms": nil, "oldest_pending_ms": nil}},
		{append([]string{"pools"}, "-redis", srv.Addr(), "-json"), map[string]any{"time": nil}},
		{append([]string{"jobs"}, onPool...), map[string]any{"0.key": nil}},
		{append([]string{"jobs", "key-a"}, onPool...), map[string]any{"key": "key-a", "created": nil}},
		{append([]string{"queue", "stats"}, onQueue...), map[string]any{"dead": 1.0, "in_flight": 0.0, "processes.0.p50_ms": nil, "processes.0.lease_for_ms": nil, "processes.0.started": nil,
			"paused": false, "rate.n": 500.0, "rate.per_ms": 1000.0, "rate.burst": 10.0}},
		{append([]string{"queue", "ls", "-state", "delayed"}, onQueue...), map[string]any{"0.id": "t2", "0.due": nil, "0.priority": 0.0}},
		{append([]string{"queue", "inspect", "t1"}, onQueue...), map[string]any{"id": "t1", "errors.0.err": "bad x", "errors.0.at": nil, "submitted": nil}},
		{append([]string{"queue", "dead"}, onQueue...), map[string]any{"0.id": "t1", "0.last_error": "bad x"}},
		{append([]string{"tenants", "ls"}, onQueue...), map[string]any{"0.id": "acme", "0.capacity": 3.0, "0.paused": false, "0.rate.per_ms": 1000.0}},
		{append([]string{"queue", "rate"}, onQueue...), map[string]any{"queue": qName, "rate.per_ms": 1000.0}},
		{append([]string{"tenants", "rate", "acme"}, onQueue...), map[string]any{"tenant": "acme", "rate.n": 50.0}},
		// the commands that change something, last
		{append([]string{"tenants", "set", "acme", "4"}, onQueue...), map[string]any{"tenant": "acme", "capacity": 4.0}},
		{append([]string{"tenants", "untenanted", "5"}, onQueue...), map[string]any{"untenanted_capacity": 5.0}},
		{append([]string{"tenants", "rate", "acme", "10/1s"}, onQueue...), map[string]any{"tenant": "acme", "rate.per_ms": 1000.0}},
		{append([]string{"tenants", "pause", "acme"}, onQueue...), map[string]any{"0.id": "acme", "0.done": "paused"}},
		{append([]string{"tenants", "resume", "acme"}, onQueue...), map[string]any{"0.id": "acme", "0.done": "resumed"}},
		{append([]string{"queue", "rate", "none"}, onQueue...), map[string]any{"queue": qName}},
		{append([]string{"queue", "pause"}, onQueue...), map[string]any{"queue": qName, "paused": true}},
		{append([]string{"queue", "resume"}, onQueue...), map[string]any{"queue": qName, "paused": false}},
		{append([]string{"tenants", "rm", "acme"}, onQueue...), map[string]any{"0.id": "acme", "0.done": nil}},
		{append([]string{"queue", "cancel", "t2"}, onQueue...), map[string]any{"0.id": "t2", "0.done": "cancelled"}},
		{append([]string{"queue", "purge-dead", "-yes"}, onQueue...), map[string]any{"deleted": 1.0}},
		{append([]string{"queue", "drain", "-yes"}, onQueue...), map[string]any{"processes_asked_to_drain": 1.0}},
	} {
		code, out, errOut := runCmd(tc.args...)
		require.Equal(t, exitOK, code, "%v: %s", tc.args, errOut)
		v := checkJSONStyle(t, strings.Join(tc.args[:2], " "), out)
		for path, want := range tc.want {
			got := jsonstyle.At(v, path)
			if assert.NotNil(t, got, "%v: %s in %s", tc.args, path, out) && want != nil {
				assert.Equal(t, want, got, "%v: %s", tc.args, path)
			}
		}
	}
}

// jsonError checks that stderr is one JSON object, {"error": "..."}, and
// returns the error.
func jsonError(t *testing.T, what, stderr string) string {
	t.Helper()
	dec := json.NewDecoder(strings.NewReader(stderr))
	var v map[string]any
	if !assert.NoError(t, dec.Decode(&v), "%s: stderr is not JSON: %s", what, stderr) {
		return ""
	}
	_, err := dec.Token()
	assert.ErrorIs(t, err, io.EOF, "%s: more than one JSON value on stderr: %s", what, stderr)
	assert.Len(t, v, 1, "%s: %s", what, stderr)
	msg, _ := v["error"].(string)
	assert.NotEmpty(t, msg, "%s: %s", what, stderr)
	return msg
}

// TestErrorsUnderJSON: with -json, an error is one JSON object on
// stderr, with the exit codes of the text output.
func TestErrorsUnderJSON(t *testing.T) {
	t.Parallel()
	qName, ctx, q := openQueue(t)
	_, err := q.Submit(ctx, []byte("x"), queue.WithTaskID("t1"), queue.WithDelay(time.Hour))
	require.NoError(t, err)
	for _, tc := range []struct {
		args []string
		code int
		want string // in the error
		out  string // on stdout, if anything
	}{
		{[]string{"queue", "stats", "-queue", "no-such-" + qName, "-redis", srv.Addr(), "-json"}, exitError, `queue "no-such-`, ""},
		{[]string{"queue", "inspect", "-queue", qName, "-redis", srv.Addr(), "-json", "nope"}, exitError, `task not found: "nope"`, ""},
		{[]string{"tenants", "ls", "-queue", "no-such-" + qName, "-redis", srv.Addr(), "-json"}, exitError, "not found", ""},
		{[]string{"status", "-pool", "no-such-" + qName, "-redis", srv.Addr(), "-json"}, exitError, "not found", ""},
		{[]string{"jobs", "-pool", "no-such-" + qName, "-redis", srv.Addr(), "-json", "k"}, exitError, "not found", ""},
		{[]string{"status", "-pool", "p", "-redis", "127.0.0.1:1", "-json"}, exitError, "redis at 127.0.0.1:1", ""},
		{[]string{"pools", "-redis", "127.0.0.1:1", "-json"}, exitError, "redis at 127.0.0.1:1", ""},
		{[]string{"queue", "cancel", "-queue", qName, "-redis", srv.Addr(), "-json", "nope", "t1"}, exitError, "1 of 2 failed",
			`[{"id":"nope","error":"queue: task not found: \"nope\""},{"id":"t1","done":"cancelled"}]` + "\n"},
		// usage errors
		{[]string{"queue", "stats", "-json"}, exitUsage, "-queue is required", ""},
		{[]string{"queue", "-json", "peek"}, exitUsage, `unknown command "peek"`, ""},
		{[]string{"status", "-json", "-bogus"}, exitUsage, "unknown flag", ""},
		{[]string{"status", "-pool", "p", "-json", "extra"}, exitUsage, "unexpected arguments", ""},
		{[]string{"status", "-pool", "p", "-redis", "redis://x:y:z", "-json"}, exitUsage, "-redis", ""},
		{[]string{"queue", "purge-dead", "-queue", qName, "-redis", srv.Addr(), "-json"}, exitUsage, "not confirmed", ""},
		{[]string{"dispatch", "-json", "-pool", "p", "k"}, exitUsage, "unknown flag", ""},
	} {
		code, out, errOut := runCmd(tc.args...)
		assert.Equal(t, tc.code, code, "%v: %s", tc.args, errOut)
		assert.Contains(t, jsonError(t, strings.Join(tc.args, " "), errOut), tc.want, "%v", tc.args)
		assert.Equal(t, tc.out, out, "%v", tc.args)
	}

	code, _, errOut := runCmd("queue", "stats", "-json=false")
	assert.Equal(t, exitUsage, code)
	assert.Contains(t, errOut, "-queue is required\n\nUsage:", "-json=false: text and usage")
}
