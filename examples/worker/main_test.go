package main

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"

	"github.com/shepherd-go/shepherd/examples/internal/cli"
	"github.com/shepherd-go/shepherd/pool"
	"github.com/shepherd-go/shepherd/shepherdtest"
)

func TestMain(m *testing.M) {
	// go-redis probes a server whose dial failed from a goroutine that
	// ends up to a second after its client closed: not ours to wait for.
	goleak.VerifyTestMain(m, goleak.IgnoreAnyFunction("github.com/redis/go-redis/v9/internal/pool.(*ConnPool).tryDial"))
}

// The worker runs jobs and exits by itself when the pool shuts down.
func TestWorkerRunsJobsAndExitsOnShutdown(t *testing.T) {
	rdb := shepherdtest.Redis(t)
	cfg := cli.Config{Redis: rdb.Options().Addr, Pool: "worker"}
	done := make(chan error, 1)
	go func() { done <- run(cfg, 2, time.Second) }()

	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	client, err := pool.AddNode(ctx, rdb, cfg.Pool, pool.WithClientOnly())
	require.NoError(t, err)
	require.Eventually(t, func() bool {
		st, err := client.Stats(ctx)
		return err == nil && len(st.Workers) == 2
	}, 10*time.Second, 20*time.Millisecond)
	require.NoError(t, client.DispatchJob(ctx, "k", []byte("v")))
	info, err := client.Job(ctx, "k")
	require.NoError(t, err)
	require.Equal(t, pool.JobRunning, info.State)
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
