package main

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/shepherd-go/shepherd/queue"
)

// The tests of the command line itself: where flags may go, how a flag is
// spelt, unknown commands, help, completion and exit codes.

// A group's flags may come before its subcommand or after it.
func TestFlagsBeforeOrAfterTheSubcommand(t *testing.T) {
	t.Parallel()
	name, ctx, q := openQueue(t)
	_, err := q.Submit(ctx, []byte("x"), queue.WithDelay(time.Hour))
	require.NoError(t, err)
	for _, args := range [][]string{
		{"queue", "-queue", name, "stats", "-redis", srv.Addr()},
		{"queue", "stats", "-queue", name, "-redis", srv.Addr()},
		{"queue", "-redis", srv.Addr(), "-queue", name, "stats"},
		{"queue", "--queue", name, "--redis=" + srv.Addr(), "stats"},
		{"queue", "-queue=" + name, "stats", "--redis", srv.Addr()},
	} {
		code, out, errOut := runCmd(args...)
		require.Equal(t, exitOK, code, "%v: %s", args, errOut)
		assert.Contains(t, out, "0 available, 1 delayed", "%v", args)
	}
	code, out, errOut := runCmd("tenants", "-queue", name, "-redis", srv.Addr(), "set", "acme", "2")
	require.Equal(t, exitOK, code, errOut)
	assert.Equal(t, "acme: capacity 2\n", out)
	code, out, errOut = runCmd("tenants", "-json", "-queue", name, "ls", "-redis", srv.Addr())
	require.Equal(t, exitOK, code, errOut)
	var ts []queue.TenantInfo
	require.NoError(t, json.Unmarshal([]byte(out), &ts), "-json before the subcommand counts")
	require.Len(t, ts, 1)
	assert.EqualValues(t, 2, ts[0].Capacity)
}

// -flag and --flag are the same flag, with its value after a space or an
// "=", and a value that begins with "-" is the flag's value.
func TestSingleAndDoubleDashFlags(t *testing.T) {
	t.Parallel()
	name, _, h := livePool(t, 1, 1)
	for i, args := range [][]string{
		{"notify", "-pool", name, "-redis", srv.Addr(), "-payload", "-x", "key-a"},
		{"notify", "--pool", name, "--redis", srv.Addr(), "--payload", "--y", "key-a"},
		{"notify", "-pool=" + name, "-redis=" + srv.Addr(), "-payload=-z", "key-a"},
		{"notify", "key-a", "--pool=" + name, "--redis=" + srv.Addr(), "--payload=w"},
	} {
		code, out, errOut := runCmd(args...)
		require.Equal(t, exitOK, code, "%v: %s", args, errOut)
		assert.Equal(t, "key-a notified\n", out, "%v", args)
		want := []string{"-x", "--y", "-z", "w"}[i]
		require.Eventually(t, func() bool {
			h.mu.Lock()
			defer h.mu.Unlock()
			return h.notified["key-a"] == want
		}, 5*time.Second, 10*time.Millisecond, "%v: the payload is not %q", args, want)
	}
	for _, args := range [][]string{
		{"status", "-pool", name, "-redis", srv.Addr(), "-json"},
		{"status", "--pool", name, "--redis", srv.Addr(), "--json"},
		{"status", "--json=true", "-pool", name, "-redis", srv.Addr()},
	} {
		code, out, errOut := runCmd(args...)
		require.Equal(t, exitOK, code, "%v: %s", args, errOut)
		assert.True(t, json.Valid([]byte(out)), "%v: %s", args, out)
	}
}

// An unknown command or subcommand is named, with exit 2 and the usage of
// the command it was looked for in, before any flag is read: operators
// type flags, and a flag the mistyped command would not know must not
// take the blame.
func TestUnknownCommandExitsTwo(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		args  []string
		bad   string
		usage string
	}{
		{[]string{"nope"}, "nope", "shepherd [command]"},
		{[]string{"queue", "peek"}, "peek", "shepherd queue [command]"},
		{[]string{"queue", "-queue", "q", "peek", "-yes"}, "peek", "shepherd queue [command]"},
		{[]string{"tenants", "inspect"}, "inspect", "shepherd tenants [command]"},
		{[]string{"demo", "inspect"}, "inspect", "shepherd demo [command]"},
		{[]string{"queus", "stats", "-queue", "newcomer"}, "queus\" (did you mean queue?)", "shepherd [command]"},
		{[]string{"stauts", "-pool", "P"}, "stauts\" (did you mean status?)", "shepherd [command]"},
		{[]string{"queue", "stast", "-queue", "q", "-bogus"}, "stast\" (did you mean stats?)", "shepherd queue [command]"},
		{[]string{"tenants", "-queue", "q", "lss", "-capacity", "3"}, "lss\" (did you mean ls?)", "shepherd tenants [command]"},
	} {
		code, out, errOut := runCmd(tc.args...)
		assert.Equal(t, exitUsage, code, "%v: %s", tc.args, errOut)
		assert.Contains(t, errOut, `unknown command "`+tc.bad, "%v", tc.args)
		assert.NotContains(t, errOut, "unknown flag", "%v", tc.args)
		assert.Contains(t, errOut, tc.usage, "%v", tc.args)
		assert.Empty(t, out, "%v", tc.args)
	}
	code, _, errOut := runCmd("staus")
	assert.Equal(t, exitUsage, code)
	assert.Contains(t, errOut, `unknown command "staus" (did you mean status?)`)
	code, _, errOut = runCmd("queus", "stats", "-queue", "q", "-json")
	assert.Equal(t, exitUsage, code)
	assert.Contains(t, jsonError(t, "queus -json", errOut), `unknown command "queus" (did you mean queue?)`)
}

// Help is on stdout, per command, with -h, --help, -help or "help CMD";
// the internal commands are not listed but still run.
func TestHelp(t *testing.T) {
	t.Parallel()
	internal := []string{"bench-worker", "bench-queue-worker", "demo-queue-worker"}
	for _, args := range [][]string{{"help"}, {"-h"}, {"--help"}, {"-help"}} {
		code, out, errOut := runCmd(args...)
		require.Equal(t, exitOK, code, "%v: %s", args, errOut)
		for _, c := range []string{"demo", "status", "pools", "jobs", "dispatch", "notify", "stop", "shutdown",
			"queue", "tenants", "bench", "web", "completion", "Exit codes: 0 ok, 1 error, 2 usage"} {
			assert.Contains(t, out, c, "%v", args)
		}
		for _, c := range internal {
			assert.NotContains(t, out+errOut, c, "%v lists an internal command", args)
		}
	}
	for _, args := range [][]string{{"help", "queue"}, {"queue", "-h"}, {"queue", "--help"}, {"queue", "-queue", "q", "-h"}} {
		code, out, errOut := runCmd(args...)
		require.Equal(t, exitOK, code, "%v: %s", args, errOut)
		for _, want := range []string{"shepherd queue [command]", "stats", "purge-dead", "drain", "--queue"} {
			assert.Contains(t, out, want, "%v", args)
		}
	}
	for _, args := range [][]string{{"help", "queue", "ls"}, {"queue", "ls", "-h"}} {
		code, out, errOut := runCmd(args...)
		require.Equal(t, exitOK, code, "%v: %s", args, errOut)
		assert.Contains(t, out, "shepherd queue ls", "%v", args)
		assert.Contains(t, out, "--state", "%v", args)
	}
	// Hidden, not gone: each answers -h with its own flags, and refuses to
	// start without them (their real runs are in the demo and bench tests).
	for _, c := range internal {
		code, out, errOut := runCmd(c, "-h")
		require.Equal(t, exitOK, code, "%s: %s", c, errOut)
		assert.Contains(t, out, "--redis", c)
		code, _, errOut = runCmd(c)
		assert.Equal(t, exitUsage, code, c)
		assert.Contains(t, errOut, "required", c)
		assert.NotContains(t, errOut, "unknown command", c)
	}
}

func TestCompletion(t *testing.T) {
	t.Parallel()
	code, out, errOut := runCmd("completion", "bash")
	require.Equal(t, exitOK, code, errOut)
	assert.Contains(t, out, "bash completion V2 for shepherd")
	assert.Contains(t, out, "__start_shepherd")
	for _, shell := range []string{"zsh", "fish", "powershell"} {
		code, out, errOut = runCmd("completion", shell)
		require.Equal(t, exitOK, code, "%s: %s", shell, errOut)
		assert.NotEmpty(t, out, shell)
	}
	// What the shell asks for as one presses Tab: subcommands, even after a
	// group's flag in its single-dash form; flags; no internal command.
	code, out, errOut = runCmd("__complete", "queue", "-queue", "q", "")
	require.Equal(t, exitOK, code, errOut)
	for _, sub := range []string{"stats", "ls", "dead", "replay", "drain"} {
		assert.Contains(t, out, sub+"\t")
	}
	code, out, errOut = runCmd("__complete", "status", "--po")
	require.Equal(t, exitOK, code, errOut)
	assert.Contains(t, out, "--pool")
	code, out, errOut = runCmd("__complete", "bench")
	require.Equal(t, exitOK, code, errOut)
	assert.NotContains(t, out, "bench-worker")
}

// "tenants set NAME -1" is a capacity below 0, not a flag; flags after it
// still count.
func TestTenantsNegativeCapacity(t *testing.T) {
	t.Parallel()
	name, _, _ := openQueue(t)
	for _, args := range [][]string{
		{"tenants", "set", "-queue", name, "acme", "-1", "-redis", srv.Addr()},
		{"tenants", "-queue", name, "-redis", srv.Addr(), "set", "acme", "-1"},
		{"tenants", "untenanted", "-queue", name, "-5", "-redis", srv.Addr()},
	} {
		code, out, errOut := runCmd(args...)
		assert.Equal(t, exitUsage, code, "%v: %s", args, errOut)
		assert.Contains(t, errOut, "capacity must be ≥ 0", "%v", args)
		assert.NotContains(t, errOut, "flag provided but not defined", "%v", args)
		assert.NotContains(t, errOut, "unknown shorthand flag", "%v", args)
		assert.Empty(t, out, "%v", args)
	}
	code, out, errOut := runCmd("tenants", "ls", "-queue", name, "-redis", srv.Addr(), "-json")
	require.Equal(t, exitOK, code, errOut)
	assert.Equal(t, "[]\n", out, "no tenant was set")
	code, out, errOut = runCmd("tenants", "set", "-queue", name, "acme", "0", "-redis", srv.Addr())
	require.Equal(t, exitOK, code, errOut)
	assert.Equal(t, "acme: capacity 0\n", out)
	code, _, errOut = runCmd("tenants", "set", "-queue", name, "acme", "x", "-redis", srv.Addr())
	assert.Equal(t, exitUsage, code)
	assert.Contains(t, errOut, `capacity "x" is not a number`)
}

// Exit codes: 0 ok (help included), 1 an error at run time, 2 a mistake in
// the command line, which prints the command's usage.
func TestExitCodes(t *testing.T) {
	t.Parallel()
	missing := "missing-" + strings.ReplaceAll(t.Name(), "/", "-")
	for _, tc := range []struct {
		args  []string
		code  int
		usage bool // the command's usage follows the error
	}{
		{[]string{"help"}, exitOK, false},
		{[]string{"status", "-h"}, exitOK, false},
		{[]string{"completion", "bash"}, exitOK, false},
		{nil, exitUsage, true},
		{[]string{"queue"}, exitUsage, true},
		{[]string{"status"}, exitUsage, true},
		{[]string{"status", "-pool", "p", "-bogus"}, exitUsage, true},
		{[]string{"status", "-pool", "p", "-interval", "soon"}, exitUsage, true},
		{[]string{"status", "-pool", "p", "-interval"}, exitUsage, true},
		{[]string{"jobs", "-pool", "p", "a", "b"}, exitUsage, true},
		{[]string{"completion", "nope"}, exitUsage, true},
		{[]string{"bench", "-scenario", "Z"}, exitUsage, true},
		{[]string{"status", "-pool", "p", "-redis", nowhere}, exitError, false},
		{[]string{"queue", "stats", "-queue", missing, "-redis", srv.Addr()}, exitError, false},
		{[]string{"jobs", "-pool", missing, "-redis", srv.Addr()}, exitError, false},
	} {
		code, _, errOut := runCmd(tc.args...)
		assert.Equal(t, tc.code, code, "%v: %s", tc.args, errOut)
		if tc.usage {
			assert.Contains(t, errOut, "Usage:", "%v", tc.args)
		} else {
			assert.NotContains(t, errOut, "Usage:", "%v", tc.args)
		}
	}
}
