package pool

import (
	"encoding/json"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/shepherd-go/shepherd/internal/redistest"
	"github.com/shepherd-go/shepherd/internal/testlog"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestLogsCarryPoolNodeWorkerKey(t *testing.T) {
	t.Parallel()
	var buf testlog.Buffer
	logger := slog.New(slog.NewJSONHandler(&buf, &slog.HandlerOptions{Level: slog.LevelDebug}))
	name := redistest.Name(t)
	n := addNode(t, srv.Client(), name, WithLogger(logger))
	w := addWorkers(t, n, newRecorder(), 1)[0]
	require.NoError(t, n.DispatchJob(testCtx(t, 10*time.Second), "logged", nil))

	// The script that records the start answers DispatchJob, so the
	// worker may log just after DispatchJob returned.
	var rec map[string]any
	require.Eventually(t, func() bool {
		for _, line := range strings.Split(strings.TrimSpace(buf.String()), "\n") {
			var r map[string]any
			if json.Unmarshal([]byte(line), &r) == nil && r["msg"] == "job started" {
				rec = r
				return true
			}
		}
		return false
	}, 5*time.Second, 5*time.Millisecond, "a debug record for the start")
	assert.Equal(t, name, rec["pool"])
	assert.Equal(t, n.ID(), rec["node"])
	assert.Equal(t, w.ID(), rec["worker"])
	assert.Equal(t, "logged", rec["key"])
}

// Redis restarted without persistence lost the pool: each node says so
// once, at ERROR, and counts it; it used to leave only a warning per
// worker.
func TestStateLostIsReportedOncePerNode(t *testing.T) {
	t.Parallel()
	s := redistest.Start(t)
	var buf testlog.Buffer
	logger := slog.New(slog.NewTextHandler(&buf, &slog.HandlerOptions{Level: slog.LevelWarn}))
	opt, reader := meterReader(t)
	n := addNode(t, s.NewClient(), redistest.Name(t), WithLogger(logger), opt)
	addWorkers(t, n, newRecorder(), 2)
	require.NoError(t, n.DispatchJob(testCtx(t, 10*time.Second), "gone", nil))

	require.NoError(t, s.Kill())
	require.NoError(t, s.Restart())
	require.Eventually(t, func() bool { return strings.Contains(buf.String(), "pool state lost") },
		10*time.Second, 10*time.Millisecond, "no one said the pool's state was lost")
	// Several keep-alive periods later, still once.
	require.Eventually(t, func() bool {
		live, err := n.LiveWorkers(testCtx(t, 5*time.Second))
		return err == nil && live == 2
	}, 10*time.Second, 20*time.Millisecond, "the workers did not rejoin")
	<-time.After(time.Second) // three keep-alive periods of WorkerTTL 1s
	assert.Equal(t, 1, strings.Count(buf.String(), "pool state lost"), buf.String())
	assert.Contains(t, buf.String(), "level=ERROR msg=\"pool state lost")
	assert.Equal(t, 1.0, collect(t, reader)[MetricStateLost])
}
