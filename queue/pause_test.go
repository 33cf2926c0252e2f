package queue

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/shepherd-go/shepherd/internal/redistest"
)

// quiet is how long a paused test watches for a start that must not
// come: a start takes about a millisecond when nothing holds it.
const quiet = 300 * time.Millisecond

// Pause lets the task in flight finish and starts nothing, in any
// process, until Resume; Resume wakes the workers at once.
func TestPauseHoldsTheQueueAcrossProcesses(t *testing.T) {
	t.Parallel()
	name := redistest.Name(t)
	q1, q2 := open(t, name), open(t, name)
	ctx := testCtx(t, 30*time.Second)
	var started atomic.Int32
	release, free := gate(t)
	h := func(ctx context.Context, t *Task) ([]byte, error) {
		started.Add(1)
		if string(t.Payload) == "long" {
			<-release
		}
		return nil, nil
	}
	serve(t, q1, h, WithWorkers(2))
	serve(t, q2, h, WithWorkers(2))
	long, err := q1.Submit(ctx, []byte("long"))
	require.NoError(t, err)
	require.Eventually(t, func() bool { return started.Load() == 1 }, 5*time.Second, time.Millisecond)
	require.NoError(t, q2.Pause(ctx))
	st, err := q1.Stats(ctx)
	require.NoError(t, err)
	assert.True(t, st.Paused)
	var fs []*Future
	for range 5 {
		f, err := q2.Submit(ctx, nil)
		require.NoError(t, err, "a paused queue accepts tasks")
		fs = append(fs, f)
	}
	delayed, err := q1.Submit(ctx, nil, WithDelay(50*time.Millisecond))
	require.NoError(t, err)
	free()
	_, err = wait(t, long, 5*time.Second)
	require.NoError(t, err, "the task in flight finishes")
	time.Sleep(quiet)
	assert.EqualValues(t, 1, started.Load(), "a task started while the queue was paused")

	begin := time.Now()
	require.NoError(t, q1.Resume(ctx))
	for _, f := range append(fs, delayed) {
		_, err := wait(t, f, 5*time.Second)
		require.NoError(t, err)
	}
	t.Logf("the 6 held tasks were done %v after Resume", time.Since(begin))
	st, err = q1.Stats(ctx)
	require.NoError(t, err)
	assert.False(t, st.Paused)
}

// PauseTenant holds one tenant's tasks; the others run. A process that
// opens the queue later finds the pause, and a resumed tenant runs.
func TestPauseTenantHoldsOnlyItsTasks(t *testing.T) {
	t.Parallel()
	name := redistest.Name(t)
	q := open(t, name)
	ctx := testCtx(t, 30*time.Second)
	require.NoError(t, q.SetTenant(ctx, "a", 4))
	require.NoError(t, q.SetTenant(ctx, "b", 4))
	require.NoError(t, q.PauseTenant(ctx, "a"))
	assert.True(t, tenantOf(t, q, "a").Paused)
	assert.False(t, tenantOf(t, q, "b").Paused)

	// Served by a process opened after the pause.
	later := open(t, name)
	var aStarted atomic.Int32
	serve(t, later, func(ctx context.Context, t *Task) ([]byte, error) {
		if string(t.Payload) == "a" {
			aStarted.Add(1)
		}
		return nil, nil
	}, WithWorkers(2))
	var as, bs []*Future
	for range 4 {
		f, err := q.Submit(ctx, []byte("a"), WithTenant("a"))
		require.NoError(t, err)
		as = append(as, f)
		f, err = q.Submit(ctx, []byte("b"), WithTenant("b"))
		require.NoError(t, err)
		bs = append(bs, f)
	}
	for _, f := range bs {
		_, err := wait(t, f, 5*time.Second)
		require.NoError(t, err)
	}
	time.Sleep(quiet)
	assert.Zero(t, aStarted.Load(), "a paused tenant's task started")
	assert.EqualValues(t, 4, tenantOf(t, q, "a").Waiting)

	require.NoError(t, q.ResumeTenant(ctx, "a"))
	for _, f := range as {
		_, err := wait(t, f, 5*time.Second)
		require.NoError(t, err)
	}
	assert.False(t, tenantOf(t, q, "a").Paused)

	assert.ErrorIs(t, q.PauseTenant(ctx, "made-up"), ErrUnknownTenant)
	assert.ErrorIs(t, q.ResumeTenant(ctx, "made-up"), ErrUnknownTenant)
	assert.ErrorIs(t, q.PauseTenant(ctx, ""), ErrInvalidOption)
	n, err := q.rdb.HExists(ctx, q.lay.tenants, "p:made-up").Result()
	require.NoError(t, err)
	assert.False(t, n)
}

// The pause is stored with the queue: it survives a Redis restart with
// AOF, and the processes that come back still start nothing.
func TestPauseSurvivesARedisRestart(t *testing.T) {
	t.Parallel()
	own := redistest.Start(t, redistest.WithAOF())
	ctx := testCtx(t, 60*time.Second)
	name := redistest.Name(t)
	q, err := Open(ctx, own.Client(), name, WithTTL(2*time.Second))
	require.NoError(t, err)
	defer func() { require.NoError(t, closeWithin(q)) }()
	require.NoError(t, q.Pause(ctx))
	var started atomic.Int32
	_, err = q.Serve(func(ctx context.Context, t *Task) ([]byte, error) {
		started.Add(1)
		return nil, nil
	}, WithWorkers(2))
	require.NoError(t, err)
	f, err := q.Submit(ctx, nil)
	require.NoError(t, err)
	require.NoError(t, own.Kill())
	require.NoError(t, own.Restart())
	require.Eventually(t, func() bool {
		st, err := q.Stats(ctx)
		return err == nil && st.Paused && len(st.Processes) == 1
	}, 10*time.Second, 20*time.Millisecond, "the process is back and the queue still paused")
	time.Sleep(quiet)
	assert.Zero(t, started.Load(), "a task started in a paused queue after the restart")
	require.NoError(t, q.Resume(ctx))
	_, err = wait(t, f, 10*time.Second)
	require.NoError(t, err)
}
