package main

import (
	"bytes"
	"context"
	"log"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/shepherd-go/shepherd/internal/redistest"
	"github.com/shepherd-go/shepherd/pool"
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

// The program runs its jobs until its ctx ends (SIGINT, SIGTERM), then
// leaves the pool without error; the jobs it did not stop wait in the pool
// for the next worker, and a second run finds them there.
func TestPoolProgramRunsJobsAndLeavesOnSignal(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	client, err := pool.AddNode(ctx, srv.Client(), "ingest", pool.WithClientOnly())
	require.NoError(t, err)
	t.Cleanup(func() { _ = client.Close(context.Background()) })

	var out syncBuffer
	log.SetOutput(&out)
	t.Cleanup(func() { log.SetOutput(os.Stderr) })
	for round := range 2 {
		runCtx, stop := context.WithCancel(ctx)
		done := make(chan error, 1)
		go func() { done <- run(runCtx, srv.Addr()) }()
		require.Eventually(t, func() bool { return strings.Count(out.String(), "running; Ctrl-C") > round },
			30*time.Second, 10*time.Millisecond, "round %d: the program did not get to running: %s", round, &out)
		require.Eventually(t, func() bool {
			_, err := client.Job(ctx, "tenant-3")
			j1, err1 := client.Job(ctx, "tenant-1")
			j2, err2 := client.Job(ctx, "tenant-2")
			return err != nil && err1 == nil && err2 == nil && j1.State == pool.JobRunning && j2.State == pool.JobRunning
		}, 30*time.Second, 20*time.Millisecond, "round %d: tenant-1 and 2 should run, tenant-3 be stopped", round)
		stop()
		select {
		case err := <-done:
			require.NoError(t, err, "round %d", round)
		case <-ctx.Done():
			t.Fatalf("round %d: the program did not leave after its ctx ended", round)
		}
		keys, err := client.JobKeys(ctx)
		require.NoError(t, err)
		assert.ElementsMatch(t, []string{"tenant-1", "tenant-2"}, keys, "round %d", round)
	}
}
