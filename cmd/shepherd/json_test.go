package main

import (
	"context"
	"encoding/json"
	"errors"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/shepherd-go/shepherd/queue"
)

var (
	snakeKey = regexp.MustCompile(`^[a-z0-9_]+$`)
	// otherUnit is a key naming a duration unit other than milliseconds.
	otherUnit = regexp.MustCompile(`_(ns|nanos|us|µs|micros|millis|s|sec|secs|seconds|m|min|mins|minutes|h|hours)$`)
	// timeLike is a string meant as a time.
	timeLike = regexp.MustCompile(`^\d{4}-\d\d-\d\dT`)
)

// checkJSONStyle checks that out is one JSON value in the CLI's style
// and returns it: every key snake_case, no duration in a unit other than
// ms, every time RFC 3339 in UTC.
func checkJSONStyle(t *testing.T, what, out string) any {
	t.Helper()
	var v any
	require.NoError(t, json.Unmarshal([]byte(out), &v), "%s: %s", what, out)
	var walk func(path string, v any)
	walk = func(path string, v any) {
		switch v := v.(type) {
		case map[string]any:
			for k, x := range v {
				assert.Regexp(t, snakeKey, k, "%s: key %s%s", what, path, k)
				assert.NotRegexp(t, otherUnit, k, "%s: key %s%s: durations are in ms", what, path, k)
				walk(path+k+".", x)
			}
		case []any:
			for _, x := range v {
				walk(path+"[].", x)
			}
		case string:
			if timeLike.MatchString(v) {
				_, err := time.Parse(time.RFC3339, v)
				assert.NoError(t, err, "%s: %s", what, path)
				assert.True(t, strings.HasSuffix(v, "Z"), "%s: %s is %s, not UTC", what, path, v)
			}
		}
	}
	walk("", v)
	return v
}

// at returns the value at path (keys and [index]es separated by dots) in
// v, or nil.
func at(v any, path string) any {
	for _, k := range strings.Split(path, ".") {
		switch x := v.(type) {
		case map[string]any:
			v = x[k]
		case []any:
			if len(x) == 0 || k != "0" {
				return nil
			}
			v = x[0]
		default:
			return nil
		}
	}
	return v
}

// TestJSONStyle runs every command that has -json and checks that all of
// them print the one style: snake_case keys, durations in ms under keys
// ending in _ms, times in RFC 3339 UTC.
func TestJSONStyle(t *testing.T) {
	t.Parallel()
	poolName, _, _ := livePool(t, 2, 3)
	qName, ctx, q := openQueue(t)
	_, err := q.Serve(func(ctx context.Context, t *queue.Task) ([]byte, error) {
		time.Sleep(2 * time.Millisecond)
		return nil, queue.Permanent(errors.New("bad " + string(t.Payload)))
	}, queue.WithWorkers(1))
	require.NoError(t, err)
	f, err := q.Submit(ctx, []byte("x"), queue.WithTaskID("t1"))
	require.NoError(t, err)
	_, err = f.Wait(ctx)
	require.ErrorIs(t, err, queue.ErrFailed)
	_, err = q.Submit(ctx, []byte("later"), queue.WithTaskID("t2"), queue.WithDelay(time.Hour))
	require.NoError(t, err)
	c, err := queue.NewClient(srv.Client(), qName)
	require.NoError(t, err)
	require.NoError(t, c.SetTenant(ctx, "acme", 3))
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
		{append([]string{"queue", "stats"}, onQueue...), map[string]any{"dead": 1.0, "in_flight": 0.0, "processes.0.p50_ms": nil, "processes.0.lease_for_ms": nil, "processes.0.started": nil}},
		{append([]string{"queue", "ls", "-state", "delayed"}, onQueue...), map[string]any{"0.id": "t2", "0.due": nil}},
		{append([]string{"queue", "inspect", "t1"}, onQueue...), map[string]any{"id": "t1", "errors.0.err": "bad x", "errors.0.at": nil, "submitted": nil}},
		{append([]string{"queue", "dead"}, onQueue...), map[string]any{"0.id": "t1", "0.last_error": "bad x"}},
		{append([]string{"tenants", "ls"}, onQueue...), map[string]any{"0.id": "acme", "0.capacity": 3.0}},
	} {
		code, out, errOut := runCmd(tc.args...)
		require.Equal(t, exitOK, code, "%v: %s", tc.args, errOut)
		v := checkJSONStyle(t, strings.Join(tc.args[:2], " "), out)
		for path, want := range tc.want {
			got := at(v, path)
			if assert.NotNil(t, got, "%v: %s in %s", tc.args, path, out) && want != nil {
				assert.Equal(t, want, got, "%v: %s", tc.args, path)
			}
		}
	}
}

func TestSnakeCase(t *testing.T) {
	for in, want := range map[string]string{"ID": "id", "InFlight": "in_flight", "WorkerTTL": "worker_ttl", "PID": "pid",
		"P50": "p50", "LeaseFor": "lease_for", "DeadDropped": "dead_dropped", "HTTPServer": "http_server", "MaxAttempts": "max_attempts"} {
		assert.Equal(t, want, snakeCase(in), in)
	}
}
