package pool

import (
	"context"
	"os"
	"sort"
	"testing"
	"time"

	"github.com/shepherd-go/shepherd/internal/redistest"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestStatsMatchWorkersAndJobKeys(t *testing.T) {
	t.Parallel()
	ctx := testCtx(t, 30*time.Second)
	name := redistest.Name(t)
	n := addNode(t, srv.Client(), name)
	addWorkers(t, n, newRecorder(), 3)
	for i := 0; i < 12; i++ {
		require.NoError(t, n.DispatchJob(ctx, keyN(i), nil))
	}
	st, err := n.Stats(ctx)
	require.NoError(t, err)
	keys, err := n.JobKeys(ctx)
	require.NoError(t, err)

	assert.Equal(t, name, st.Pool)
	assert.Equal(t, len(keys), st.Jobs)
	assert.Equal(t, 12, st.Running)
	assert.Zero(t, st.QueueDepth)
	assert.Zero(t, st.Pending)
	assert.Empty(t, st.Orphans)
	require.Len(t, st.Nodes, 1)
	assert.Equal(t, n.ID(), st.Nodes[0].ID)
	assert.Less(t, st.Nodes[0].Age, time.Second)
	require.Len(t, st.Workers, 3)
	total := 0
	var all []string
	for i, ws := range st.Workers {
		assert.Equal(t, i, ws.Slot)
		assert.Equal(t, n.ID(), ws.Node)
		assert.True(t, ws.Healthy)
		assert.Len(t, ws.Keys, ws.Jobs)
		assert.True(t, sort.StringsAreSorted(ws.Keys))
		all = append(all, ws.Keys...)
		total += ws.Jobs
	}
	assert.Equal(t, 12, total)
	sort.Strings(all)
	assert.Equal(t, keys, all, "every job is listed under its worker")
	assert.Equal(t, 3, st.WorkersBusy+st.WorkersIdle)

	// Inspect reads the same without a node, judging health by the pool's
	// own WorkerTTL (1s here): no option can make it disagree.
	ins, err := Inspect(ctx, srv.Client(), name)
	require.NoError(t, err)
	assert.True(t, ins.Exists)
	assert.Equal(t, time.Second, ins.WorkerTTL, "the pool's own TTL, as its node stored it")
	assert.Equal(t, 2*time.Second, ins.PendingJobTTL)
	assert.Equal(t, st.Jobs, ins.Jobs)
	require.Len(t, ins.Nodes, 1)
	assert.Equal(t, n.ID(), ins.Nodes[0].ID)
	assert.True(t, ins.Nodes[0].Healthy)
	assert.Equal(t, os.Getpid(), ins.Nodes[0].PID)
	assert.NotEmpty(t, ins.Nodes[0].Host)
	assert.Equal(t, len(st.Workers), len(ins.Workers))
}

func TestStatsQueueAndPending(t *testing.T) {
	t.Parallel()
	ctx := testCtx(t, 30*time.Second)
	n := addNode(t, srv.Client(), redistest.Name(t)) // routes, but has no worker
	dctx, cancel := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- n.DispatchJob(dctx, "waiting", nil) }()

	var st *Stats
	require.Eventually(t, func() bool {
		var err error
		st, err = n.Stats(ctx)
		require.NoError(t, err)
		return st.Pending == 1 && st.OldestPending > 100*time.Millisecond
	}, 10*time.Second, 20*time.Millisecond)
	assert.Equal(t, int64(1), st.QueueDepth)
	assert.Equal(t, 1, st.Jobs)
	assert.Zero(t, st.Running)
	assert.Empty(t, st.Orphans, "a queued job has no owner yet, but it is not orphaned")

	cancel()
	select {
	case err := <-done:
		require.ErrorIs(t, err, context.Canceled)
	case <-ctx.Done():
		t.Fatal("DispatchJob did not return after its ctx ended")
	}
}

func TestInspectShowsOrphansOfACrashedNode(t *testing.T) {
	t.Parallel()
	ctx := testCtx(t, 30*time.Second)
	name := redistest.Name(t)
	n := addNode(t, srv.Client(), name)
	addWorkers(t, n, newRecorder(), 1)
	require.NoError(t, n.DispatchJob(ctx, "lonely", nil))
	n.crash() // nobody is left to reap the worker

	require.Eventually(t, func() bool {
		st, err := Inspect(ctx, srv.Client(), name)
		require.NoError(t, err)
		return len(st.Orphans) == 1 && st.Orphans[0] == "lonely" && !st.Workers[0].Healthy
	}, 10*time.Second, 50*time.Millisecond)

	// Leave nothing behind in the shared server.
	c := addNode(t, srv.Client(), name, WithClientOnly())
	require.NoError(t, c.Shutdown(ctx))
}

func TestStatsErrors(t *testing.T) {
	t.Parallel()
	ctx := testCtx(t, 10*time.Second)
	_, err := Inspect(ctx, nil, "p")
	assert.ErrorIs(t, err, ErrInvalidOption)
	_, err = Inspect(ctx, srv.Client(), "")
	assert.ErrorIs(t, err, ErrInvalidOption)
	st, err := Inspect(ctx, srv.Client(), redistest.Name(t))
	require.NoError(t, err, "an empty pool is no error")
	assert.Zero(t, st.Jobs)
	assert.False(t, st.Exists)
	assert.Equal(t, DefaultWorkerTTL, st.WorkerTTL)

	n := addNode(t, srv.Client(), redistest.Name(t))
	require.NoError(t, n.Close(ctx))
	_, err = n.Stats(ctx)
	assert.ErrorIs(t, err, ErrNodeClosed)
}
