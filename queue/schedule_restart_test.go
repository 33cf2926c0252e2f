package queue

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/shepherd-go/shepherd/internal/redistest"
)

// Redis killed and restarted with AOF while a schedule ticks: the
// schedule and its last tick survive, and each tick runs once, none
// skipped (the outage is shorter than the 5s grace). Its tasks' ids are
// free as soon as they finish (oneMs): only the stored last tick keeps a
// tick from being enqueued again.
func TestSchedulesSurviveARedisRestartWithAOF(t *testing.T) {
	t.Parallel()
	own := redistest.Start(t, redistest.WithAOF())
	ctx := testCtx(t, 60*time.Second)
	q, err := Open(ctx, own.Client(), "schedules-restart", WithTTL(2*time.Second))
	require.NoError(t, err)
	defer func() { require.NoError(t, closeWithin(q)) }()
	runs := newTickRuns()
	s, err := q.Serve(runs.handle, WithWorkers(2))
	require.NoError(t, err)
	require.NoError(t, q.SetSchedule(ctx, "s", "@every 1s", nil, oneMs))
	require.Eventually(t, func() bool { return len(runs.ticks("s")) >= 2 }, 20*time.Second, 10*time.Millisecond)
	before := schedule(t, &q.Client, "s")

	require.NoError(t, own.Kill())
	time.Sleep(500 * time.Millisecond) // Redis stays down for a tick or so
	require.NoError(t, own.Restart())
	require.Eventually(t, func() bool {
		ticks := runs.ticks("s")
		return len(ticks) > 0 && ticks[len(ticks)-1].Sub(before.LastTick) >= 3*time.Second
	}, 30*time.Second, 10*time.Millisecond, "no ticks after the restart")
	require.NoError(t, s.Stop(ctx))
	after := schedule(t, &q.Client, "s")
	assert.Equal(t, before.Created, after.Created)
	assert.Equal(t, before.Spec, after.Spec)
	runs.checkOnceInOrder(t, "s", time.Second)
}
