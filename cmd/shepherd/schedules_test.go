package main

import (
	"strings"
	"testing"

	"github.com/shepherd-go/shepherd/internal/jsonstyle"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestSchedulesCommands(t *testing.T) {
	t.Parallel()
	name, ctx, q := openQueue(t)
	flags := []string{"-queue", name, "-redis", srv.Addr()}
	cmd := func(args ...string) (int, string, string) {
		return runCmd(append(append([]string{"schedules"}, args...), flags...)...)
	}

	// Bad input is refused before connecting: a usage error even with
	// Redis down.
	code, _, errOut := runCmd("schedules", "set", "nightly", "61 * * * *", "-queue", name, "-redis", "127.0.0.1:1")
	require.Equal(t, exitUsage, code, errOut)
	assert.Contains(t, errOut, `schedule spec "61 * * * *"`)
	assert.NotContains(t, errOut, "connection refused")

	code, out, errOut := cmd("set", "nightly", "0 3 * * *", "--tz", "Europe/Paris", "--payload", "p", "--no-overlap", "--catch-up", "2")
	require.Equal(t, exitOK, code, errOut)
	assert.Equal(t, "nightly: 0 3 * * *\n", out)
	code, _, errOut = cmd("set", "beat", "@every 1m", "-json")
	require.Equal(t, exitOK, code, errOut)

	code, out, errOut = cmd("ls")
	require.Equal(t, exitOK, code, errOut)
	lines := strings.Split(strings.TrimSpace(out), "\n")
	require.Len(t, lines, 3, out)
	assert.Regexp(t, `^SCHEDULE\s+SPEC\s+ZONE\s+NEXT\s+LAST TICK\s+RESULT\s+LAST TASK$`, lines[0])
	assert.Regexp(t, `^beat\s+@every 1m\s+-\s+\d{4}-\S+Z\s+-\s+-\s+-$`, lines[1])
	assert.Regexp(t, `^nightly\s+0 3 \* \* \*\s+Europe/Paris\s+\d{4}-\d\d-\d\dT0[12]:00:00.000Z\s+-\s+-\s+-$`, lines[2])

	code, out, errOut = cmd("run", "nightly")
	require.Equal(t, exitOK, code, errOut)
	assert.Regexp(t, `^nightly: queued task nightly@now-\w+\n$`, out)

	code, out, errOut = cmd("ls", "-json")
	require.Equal(t, exitOK, code, errOut)
	list, _ := checkJSONStyle(t, "schedules ls", out).([]any)
	require.Len(t, list, 2)
	v := list[1]
	assert.Equal(t, "nightly", jsonstyle.At(v, "name"))
	assert.Equal(t, "Europe/Paris", jsonstyle.At(v, "time_zone"))
	assert.Equal(t, true, jsonstyle.At(v, "no_overlap"))
	assert.EqualValues(t, 2, jsonstyle.At(v, "catch_up"))
	assert.EqualValues(t, 60_000, jsonstyle.At(v, "timeout_ms"))
	assert.NotNil(t, jsonstyle.At(v, "next"))
	assert.Nil(t, jsonstyle.At(v, "last_tick"))
	assert.Contains(t, jsonstyle.At(v, "last_task_id"), "nightly@now-")
	assert.NotNil(t, jsonstyle.At(v, "last_run"))

	code, out, errOut = cmd("rm", "nightly", "beat")
	require.Equal(t, exitOK, code, errOut)
	assert.Equal(t, "nightly: removed\nbeat: removed\n", out)
	all, err := q.Schedules(ctx)
	require.NoError(t, err)
	assert.Empty(t, all)

	code, _, _ = cmd("rm", "nightly")
	assert.Equal(t, exitError, code)
	code, _, _ = cmd("run", "nightly")
	assert.Equal(t, exitError, code)
	for _, bad := range [][]string{
		{"set", "x", "61 * * * *"},
		{"set", "x", "@hourly", "--tz", "Nowhere/Else"},
		{"set", "x", "@hourly", "--catch-up", "-1"},
		{"set", "x", "@hourly", "--priority", "10"},
		{"set", "x"},
		{"run"},
		{"rm"},
	} {
		code, _, _ = cmd(bad...)
		assert.Equal(t, exitUsage, code, "%v", bad)
	}
	all, err = q.Schedules(ctx)
	require.NoError(t, err)
	assert.Empty(t, all, "a refused set wrote")
}
