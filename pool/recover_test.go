package pool

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/shepherd-go/shepherd/internal/member"
	"github.com/shepherd-go/shepherd/internal/redistest"
)

// TestARecoveryWalkGoesOnWhereItStopped: the janitor's walk through the
// job records for jobs to recover spans passes. A pass takes one step
// here (recoverStep): the first pass recovers some of a dead node's jobs
// and leaves the walk where it stopped, and the passes after it go on
// from there until the walk recovered every one. (A walk used to run
// whole within a pass, whose deadline cut it at about a million jobs;
// the next pass started over from the first record, never reaching the
// last ones.) A worker dying during a walk starts another walk after it.
func TestARecoveryWalkGoesOnWhereItStopped(t *testing.T) {
	t.Parallel()
	ctx := testCtx(t, 60*time.Second)
	name := redistest.Name(t)
	lay, err := newLayout(name)
	require.NoError(t, err)
	// Nobody else's janitor: this test runs the walk itself.
	held, err := member.NewLease(srv.Client(), lay.janitor, "test").Hold(ctx, time.Minute)
	require.NoError(t, err)
	require.True(t, held)

	n := addNode(t, srv.Client(), name)
	addWorkers(t, n, newRecorder(), 2)
	dead := addNode(t, srv.NewClient(), name)
	addWorkers(t, dead, newRecorder(), 2)
	const total = 400
	for i := range total {
		require.NoError(t, n.DispatchJob(ctx, keyN(i), nil))
	}
	dead.crash()
	var reaped []string
	require.Eventually(t, func() bool {
		reaped = append(reaped, n.reap(ctx)...)
		return len(reaped) == 2
	}, 10*time.Second, 50*time.Millisecond, "the crashed node's workers are declared dead")
	orphans := func() int {
		st, err := Inspect(ctx, srv.Client(), name)
		require.NoError(t, err)
		return st.OrphanJobs
	}
	before := orphans()
	require.Greater(t, before, 50, "the dead workers ran jobs")

	n.test.recoverStep.Store(40) // a pass: one step of about 40 records
	var walk sweep
	require.True(t, walk.due(true))
	walk.dead = append(walk.dead, reaped...) // as the janitor does
	n.recoverJobs(ctx, &walk)
	assert.NotEmpty(t, walk.cursor, "the walk goes on next pass")
	assert.Empty(t, walk.done, "a walk is recorded once it ends")
	after := orphans()
	assert.Less(t, after, before, "the first step recovered some")
	assert.Positive(t, after, "one step did not recover them all")

	passes := 1
	for walk.ended.IsZero() && passes < 1000 {
		// A worker dying halfway starts another walk after this one.
		require.True(t, walk.due(passes == 3))
		n.recoverJobs(ctx, &walk)
		passes++
	}
	assert.Equal(t, 0, orphans(), "the walk reached every record")
	require.Len(t, walk.done, 1, "the walk that ended, one Recovery")
	assert.ElementsMatch(t, reaped, walk.done[0].dead)
	assert.EqualValues(t, before, walk.done[0].jobs, "every job the dead workers ran")
	assert.Greater(t, passes, total/40/2, "one step a pass")
	assert.Equal(t, "0", walk.cursor, "a worker died during the walk: another one follows at once")
	assert.False(t, walk.again)
	for walk.cursor != "" {
		require.True(t, walk.due(false))
		n.recoverJobs(ctx, &walk)
	}
	assert.False(t, walk.due(false), "the next walk waits")
	assert.GreaterOrEqual(t, walk.gap, n.cfg.recoverEvery())
}

// TestRecoveryWalksTakeABoundedShare: the wait after a walk is at least
// recoverShare times what it took, and never less than recoverEvery.
func TestRecoveryWalksTakeABoundedShare(t *testing.T) {
	t.Parallel()
	cfg := nodeConfig{pendingJobTTL: 20 * time.Second}
	assert.Equal(t, 5*time.Second, cfg.nextRecover(10*time.Millisecond))
	assert.Equal(t, 60*time.Second, cfg.nextRecover(3*time.Second), "a walk of a million jobs")
	var s sweep
	assert.True(t, s.due(false), "the first walk runs at once")
	assert.False(t, s.urgent)
	s.cursor, s.ended, s.gap = "", time.Now(), time.Minute
	assert.False(t, s.due(false))
	assert.True(t, s.due(true), "a worker died")
	assert.True(t, s.urgent, "its jobs are down: the walk takes longer passes")
	s.urgent = false
	assert.True(t, s.due(true))
	assert.True(t, s.urgent && s.again, "a death during a walk hurries it, and another follows")
	cfg.workerTTL = 10 * time.Second
	assert.Equal(t, 125*time.Millisecond, cfg.recoverBudget(false))
	assert.Equal(t, 500*time.Millisecond, cfg.recoverBudget(true))
}
