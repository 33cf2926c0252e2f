package main

import (
	"context"
	"testing"
	"time"

	"github.com/shepherd-go/shepherd/examples/internal/cli"
	"github.com/shepherd-go/shepherd/internal/redistest"
	"github.com/shepherd-go/shepherd/pool"
	"github.com/stretchr/testify/require"
)

var srv *redistest.Server

func TestMain(m *testing.M) { redistest.Main(m, &srv) }

// The worker runs jobs and exits by itself when the pool shuts down.
func TestWorkerRunsJobsAndExitsOnShutdown(t *testing.T) {
	cfg := cli.Config{Redis: srv.Addr(), Pool: redistest.Name(t)}
	done := make(chan error, 1)
	go func() { done <- run(cfg, 2, time.Second) }()

	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	client, err := pool.AddNode(ctx, srv.Client(), cfg.Pool, pool.WithClientOnly())
	require.NoError(t, err)
	require.Eventually(t, func() bool {
		st, err := client.Stats(ctx)
		return err == nil && len(st.Workers) == 2
	}, 10*time.Second, 20*time.Millisecond)
	require.NoError(t, client.DispatchJob(ctx, "k", []byte("v")))
	require.NoError(t, client.NotifyWorker(ctx, "k", []byte("n")))
	require.NoError(t, client.Shutdown(ctx))
	select {
	case err := <-done:
		require.NoError(t, err)
	case <-ctx.Done():
		t.Fatal("the worker did not exit after the pool shut down")
	}
	require.Error(t, run(cfg, 0, time.Second), "-workers 0 is refused")
}
