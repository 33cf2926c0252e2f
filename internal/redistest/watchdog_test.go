package redistest

import (
	"errors"
	"os"
	"os/exec"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

const hangEnv = "REDISTEST_WATCHDOG_HANG"

// TestWatchdogNamesAHungTestLast runs this test binary again with a short
// -test.timeout and this test hanging in it: the child must exit with the
// watchdog's status, and the last lines of its output must name this test
// and the line it waits at.
func TestWatchdogNamesAHungTestLast(t *testing.T) {
	if os.Getenv(hangEnv) != "" {
		select {} // the hang the watchdog is to name
	}
	cmd := exec.Command(os.Args[0], "-test.run=^TestWatchdogNamesAHungTestLast$", "-test.timeout=5s")
	cmd.Env = append(os.Environ(), hangEnv+"=1")
	out, err := cmd.CombinedOutput()
	var exit *exec.ExitError
	require.True(t, errors.As(err, &exit), "the child ended with %v:\n%s", err, out)
	assert.Equal(t, 2, exit.ExitCode(), "the watchdog's status, not go test's timeout panic:\n%s", out)
	lines := strings.Split(strings.TrimSpace(string(out)), "\n")
	require.GreaterOrEqual(t, len(lines), 2)
	tail := lines[len(lines)-2:]
	assert.Contains(t, tail[0], "tests still running after 4.5s (1)")
	assert.Contains(t, tail[1], "TestWatchdogNamesAHungTestLast [select (no cases)")
	assert.Contains(t, tail[1], "watchdog_test.go:22")
	assert.Contains(t, string(out), "goroutine ", "the whole dump comes first")
}
