package main

import (
	"bytes"
	"context"
	"log"
	"os"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/shepherd-go/shepherd/internal/redistest"
)

var srv *redistest.Server

func TestMain(m *testing.M) { redistest.Main(m, &srv) }

// syncBuffer is a bytes.Buffer the log package and the test share.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// The program runs its tasks, reports the malformed one's failure, serves
// until its ctx ends (SIGINT, SIGTERM), then closes without error.
func TestQueueProgramRunsItsTasksAndStopsOnSignal(t *testing.T) {
	var out syncBuffer
	log.SetOutput(&out)
	t.Cleanup(func() { log.SetOutput(os.Stderr) })
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	done := make(chan error, 1)
	go func() { done <- run(ctx, srv.Addr()) }()

	require.Eventually(t, func() bool { return bytes.Contains([]byte(out.String()), []byte("serving;")) },
		30*time.Second, 10*time.Millisecond, "the program did not get to serving: %s", &out)
	cancel()
	select {
	case err := <-done:
		require.NoError(t, err)
	case <-time.After(15 * time.Second):
		t.Fatal("the program did not stop after its ctx ended")
	}
	logged := out.String()
	assert.Contains(t, logged, ": thumbnail of cat.png by worker ")
	assert.Contains(t, logged, ": thumbnail of dog.png by worker ")
	assert.Regexp(t, `task \S+ failed: .*empty name`, logged)
}
