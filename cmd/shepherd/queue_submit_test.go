package main

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/shepherd-go/shepherd/pool"
	"github.com/shepherd-go/shepherd/queue"
)

// queue submit enqueues a task with its payload from the argument, a
// file or stdin, and the options given; -wait prints the result.
func TestQueueSubmit(t *testing.T) {
	t.Parallel()
	name, ctx, q := openQueue(t)
	require.NoError(t, q.SetTenant(ctx, "acme", 3))
	args := func(more ...string) []string {
		return append([]string{"queue", "submit", "-queue", name, "-redis", srv.Addr()}, more...)
	}

	code, out, errOut := runCmd(args("hello", "-id", "t1", "-tenant", "acme", "-priority", "7", "-delay", "1h")...)
	require.Equal(t, exitOK, code, errOut)
	assert.Equal(t, "t1\n", out)
	ti, err := q.Inspect(ctx, "t1")
	require.NoError(t, err)
	assert.Equal(t, "hello", string(ti.Payload))
	assert.Equal(t, "acme", ti.Tenant)
	assert.Equal(t, 7, ti.Priority)
	assert.Equal(t, queue.StateDelayed, ti.State)

	file := filepath.Join(t.TempDir(), "payload.json")
	require.NoError(t, os.WriteFile(file, []byte(`{"from":"file"}`), 0o600))
	code, out, errOut = runCmd(args("-file", file, "-dedup", "k1", "-json")...)
	require.Equal(t, exitOK, code, errOut)
	var got struct {
		ID        string `json:"id"`
		Duplicate bool   `json:"duplicate"`
	}
	require.NoError(t, json.Unmarshal([]byte(out), &got))
	ti, err = q.Inspect(ctx, got.ID)
	require.NoError(t, err)
	assert.Equal(t, `{"from":"file"}`, string(ti.Payload))
	assert.Equal(t, "k1", ti.DedupKey)
	first := got.ID
	code, out, errOut = runCmd(args("again", "-dedup", "k1", "-json")...)
	require.Equal(t, exitOK, code, errOut)
	require.NoError(t, json.Unmarshal([]byte(out), &got))
	assert.Equal(t, first, got.ID)
	assert.True(t, got.Duplicate)

	// From stdin, waiting for the result of a serving process.
	_, err = q.Serve(func(ctx context.Context, t *queue.Task) ([]byte, error) {
		return []byte(strings.ToUpper(string(t.Payload))), nil
	}, queue.WithWorkers(1))
	require.NoError(t, err)
	var sout, serr bytes.Buffer
	code = runWithStdin("from stdin", args("-", "-wait"), &sout, &serr)
	require.Equal(t, exitOK, code, serr.String())
	lines := strings.Split(strings.TrimSpace(sout.String()), "\n")
	require.Len(t, lines, 2, sout.String())
	assert.Equal(t, "FROM STDIN", lines[1])

	// Bad input: nothing is submitted.
	st, err := q.Stats(ctx)
	require.NoError(t, err)
	for _, bad := range [][]string{
		args("x", "-priority", "99"),
		args("x", "-file", file),
		args("-file", filepath.Join(t.TempDir(), "missing")),
		args("a", "b"),
	} {
		code, _, errOut := runCmd(bad...)
		assert.Equal(t, exitUsage, code, "%v: %s", bad, errOut)
	}
	code, _, errOut = runCmd(args("x", "-tenant", "nobody")...)
	assert.Equal(t, exitError, code)
	assert.Contains(t, errOut, "unknown tenant")
	st2, err := q.Stats(ctx)
	require.NoError(t, err)
	assert.Equal(t, st.Available+st.Delayed, st2.Available+st2.Delayed, "bad input submitted a task")
}

// queue delete asks first, refuses while a process has the queue open
// unless -force, and then removes it.
func TestQueueDelete(t *testing.T) {
	t.Parallel()
	name, ctx, q := openQueue(t)
	_, err := q.Submit(ctx, nil, queue.WithDelay(time.Hour))
	require.NoError(t, err)
	args := func(more ...string) []string {
		return append([]string{"queue", "delete", "-queue", name, "-redis", srv.Addr()}, more...)
	}
	var out, errOut bytes.Buffer
	code := runWithStdin("n\n", args(), &out, &errOut)
	assert.Equal(t, exitUsage, code)
	assert.Contains(t, errOut.String(), "not confirmed")

	code, _, msg := runCmd(args("-yes")...)
	assert.Equal(t, exitError, code)
	assert.Contains(t, msg, "in use by live processes")
	assert.Contains(t, msg, "-force")

	require.NoError(t, q.Close(ctx))
	code, stdout, msg := runCmd(args("-yes", "-json")...)
	require.Equal(t, exitOK, code, msg)
	var res struct {
		Deleted int `json:"deleted_keys"`
	}
	require.NoError(t, json.Unmarshal([]byte(stdout), &res))
	assert.Positive(t, res.Deleted)
	c, err := queue.NewClient(srv.Client(), name)
	require.NoError(t, err)
	exists, err := c.Exists(ctx)
	require.NoError(t, err)
	assert.False(t, exists)
	code, _, msg = runCmd(args("-yes")...)
	assert.Equal(t, exitError, code)
	assert.Contains(t, msg, "not found")
}

// pool delete removes a pool whose nodes have closed, and refuses one
// with a live node unless -force; a queue of the same name keeps its keys.
func TestPoolDelete(t *testing.T) {
	t.Parallel()
	name, ctx, _ := openQueue(t)
	node, err := pool.AddNode(ctx, srv.Client(), name)
	require.NoError(t, err)
	args := func(more ...string) []string {
		return append([]string{"pool", "delete", "-pool", name, "-redis", srv.Addr()}, more...)
	}
	code, _, msg := runCmd(args("-json")...)
	assert.Equal(t, exitUsage, code, "-json without -yes")
	assert.Contains(t, msg, "not confirmed")
	code, _, msg = runCmd(args("-yes")...)
	assert.Equal(t, exitError, code)
	assert.Contains(t, msg, "in use by live nodes")

	require.NoError(t, node.Close(ctx))
	code, out, msg := runCmd(args("-yes")...)
	require.Equal(t, exitOK, code, msg)
	assert.Contains(t, out, "pool "+name+" deleted (")
	ok, err := pool.Exists(ctx, srv.Client(), name)
	require.NoError(t, err)
	assert.False(t, ok)
	c, err := queue.NewClient(srv.Client(), name)
	require.NoError(t, err)
	exists, err := c.Exists(ctx)
	require.NoError(t, err)
	assert.True(t, exists, "the same-named queue was deleted")

	code, _, msg = runCmd(args("-yes")...)
	assert.Equal(t, exitError, code)
	assert.Contains(t, msg, `pool "`+name+`" not found`)
}
