package main

import (
	"bytes"
	"context"
	"io"
	"testing"
	"time"

	"github.com/shepherd-go/shepherd/internal/redistest"
	"github.com/shepherd-go/shepherd/pool"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// nowhere is an address nothing listens on: a command that used it
// instead of the -redis it was given would fail, never reach another
// Redis.
const nowhere = "127.0.0.1:1"

// Flags after the keys count: "dispatch -pool P k9 -redis ADDR" used to
// dispatch "k9", "-redis" and "ADDR" as three keys to the default Redis.
func TestFlagsAfterKeys(t *testing.T) {
	t.Parallel()
	name, n, _ := livePool(t, 1, 0)
	var out, errOut bytes.Buffer
	code := run([]string{"dispatch", "-redis", nowhere, "-pool", name, "k9", "-redis", srv.Addr(), "-payload", "p"}, &out, &errOut)
	require.Equal(t, exitOK, code, errOut.String())
	assert.Equal(t, "k9 started\n", out.String())
	keys, err := n.JobKeys(context.Background())
	require.NoError(t, err)
	assert.Equal(t, []string{"k9"}, keys, "flags after a key were taken for keys")

	// After "--" everything is a key, even what looks like a flag.
	out.Reset()
	code = run([]string{"dispatch", "-pool", name, "-redis", srv.Addr(), "--", "-odd", "k10"}, &out, &errOut)
	require.Equal(t, exitOK, code, errOut.String())
	assert.Equal(t, "-odd started\nk10 started\n", out.String())

	// A key that looks like a flag, without "--", is a usage error.
	errOut.Reset()
	code = run([]string{"stop", "-pool", name, "-redis", srv.Addr(), "-yes", "k9", "-odd"}, &out, &errOut)
	assert.Equal(t, exitUsage, code)
	assert.Contains(t, errOut.String(), "unknown flag: --odd")
}

// Every command that names a pool says when Redis holds nothing of it,
// exits 1, and creates nothing.
func TestUnknownPoolIsNotFound(t *testing.T) {
	t.Parallel()
	name := redistest.Name(t)
	base := []string{"-redis", srv.Addr(), "-pool", name}
	for _, args := range [][]string{
		{"status"}, {"status", "-json"}, {"jobs"}, {"dispatch", "k"}, {"notify", "-payload", "x", "k"},
		{"stop", "-yes", "k"}, {"shutdown", "-yes"},
	} {
		var out, errOut bytes.Buffer
		code := run(append(append([]string{args[0]}, base...), args[1:]...), &out, &errOut)
		assert.Equal(t, exitError, code, "%v: %s", args, errOut.String())
		msg := errOut.String()
		if args[len(args)-1] == "-json" {
			msg = jsonError(t, args[0], msg)
		}
		assert.Contains(t, msg, `pool "`+name+`" not found`, "%v", args)
		assert.NotContains(t, out.String(), "shut down", "%v", args)
	}
	left, err := srv.Client().Keys(context.Background(), "shepherd:{"+name+"}:*").Result()
	require.NoError(t, err)
	assert.Empty(t, left, "a command on an unknown pool created keys")
}

// dispatch into a pool with no live worker says so for each key at once,
// instead of waiting -timeout for a bare "context deadline exceeded".
func TestDispatchWithoutWorkers(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	name := redistest.Name(t)
	n, err := pool.AddNode(ctx, srv.Client(), name) // a full node, no worker
	require.NoError(t, err)
	t.Cleanup(func() { _ = n.Close(context.Background()) })
	var out, errOut bytes.Buffer
	began := time.Now()
	code := run([]string{"dispatch", "-redis", srv.Addr(), "-pool", name, "a", "b"}, &out, &errOut)
	assert.Equal(t, exitError, code)
	assert.Less(t, time.Since(began), 5*time.Second)
	for _, k := range []string{"a", "b"} {
		assert.Contains(t, errOut.String(), k+`: not dispatched: pool "`+name+`" has no live worker`)
	}
	keys, err := n.JobKeys(ctx)
	require.NoError(t, err)
	assert.Empty(t, keys)
}

// normalizeArgs hands cobra long flags with two dashes, each value after
// its flag, and positional arguments that begin with "-" after a "--".
func TestNormalizeArgs(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct{ in, want []string }{
		{[]string{"queue", "-queue", "q", "stats"}, []string{"queue", "stats", "--queue", "q"}},
		{[]string{"queue", "stats", "--queue=q", "-json"}, []string{"queue", "stats", "--queue=q", "--json"}},
		{[]string{"dispatch", "-pool", "p", "-payload", "-x", "k"}, []string{"dispatch", "--pool", "p", "--payload", "-x", "k"}},
		{[]string{"bench", "-scale", "-1"}, []string{"bench", "--scale", "-1"}},
		{[]string{"status", "-h"}, []string{"status", "-h"}},
		{[]string{"status", "-help"}, []string{"status", "--help"}},
		{[]string{"status", "-nope", "x"}, []string{"status", "--nope", "x"}},
		{[]string{"tenants", "set", "-queue", "q", "acme", "-1", "-redis", "r"},
			[]string{"tenants", "set", "--queue", "q", "--redis", "r", "--", "acme", "-1"}},
		{[]string{"dispatch", "-pool", "p", "--", "-odd", "k", "-pool"}, []string{"dispatch", "--pool", "p", "--", "-odd", "k", "-pool"}},
		{[]string{"dispatch", "k", "--", "k2"}, []string{"dispatch", "k", "k2"}},
		{[]string{"dispatch", "k", "--", "k2", "-pool", "p"}, []string{"dispatch", "--", "k", "k2", "-pool", "p"}},
		// demo's own flag goes with the subcommand, as cobra would have it
		// (and demo queue refuses it).
		{[]string{"demo", "-jobs", "10", "queue"}, []string{"demo", "queue", "--jobs", "10"}},
		{[]string{"demo", "queue", "-tasks", "10"}, []string{"demo", "queue", "--tasks", "10"}},
		{[]string{"demo", "x", "queue"}, []string{"demo", "x", "queue"}},
		{[]string{"help", "queue", "ls"}, []string{"help", "queue", "ls"}},
		{[]string{"completion", "bash"}, []string{"completion", "bash"}},
		// A completion request keeps its order, and the word being
		// completed as typed.
		{[]string{"__complete", "jobs", "k", "-pool", "p", "-js"}, []string{"__complete", "jobs", "k", "--pool", "p", "-js"}},
		{nil, []string{}},
	} {
		got := normalizeArgs(newRoot(io.Discard, io.Discard), tc.in)
		assert.Equal(t, tc.want, got, "%q", tc.in)
	}
}
