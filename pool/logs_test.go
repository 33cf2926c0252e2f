package pool

import (
	"bytes"
	"encoding/json"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/shepherd-go/shepherd/internal/redistest"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// syncBuffer is a bytes.Buffer safe for the node's goroutines.
type syncBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

func TestLogsCarryPoolNodeWorkerKey(t *testing.T) {
	t.Parallel()
	var buf syncBuffer
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
