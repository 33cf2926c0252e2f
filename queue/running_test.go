package queue

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/shepherd-go/shepherd/internal/redistest"
)

// A take leaves the task's hash as it was: the running attempt lives in
// active alone (wire.go, "Running attempts"), Inspect and Tasks show it
// from there, and its end writes the attempt's number (not its start)
// into the hash with the outcome, and deletes the payload and the
// submitter, which a kept outcome does not need.
func TestARunningAttemptLivesInActiveAlone(t *testing.T) {
	t.Parallel()
	q := open(t, redistest.Name(t))
	ctx := testCtx(t, 20*time.Second)
	release, free := gate(t)
	serve(t, q, func(ctx context.Context, t *Task) ([]byte, error) {
		<-release
		return []byte("r"), nil
	}, WithWorkers(1))
	require.NoError(t, q.SetTenant(ctx, "ten\nant", 2))
	f, err := q.Submit(ctx, []byte("x"), WithTenant("ten\nant"))
	require.NoError(t, err)
	require.Eventually(t, func() bool { return q.rdb.HExists(ctx, q.lay.active, f.ID()).Val() }, 5*time.Second, 5*time.Millisecond)

	stored := storedTask(t, ctx, q.rdb, q.lay, f.ID())
	assert.Equal(t, "waiting", stored[fieldState], "the take wrote the task's record")
	for _, field := range []string{fieldAttempts, fieldOwner, fieldBegan} {
		assert.NotContains(t, stored, field, "the take wrote the task's record")
	}
	run := strings.SplitN(q.rdb.HGet(ctx, q.lay.active, f.ID()).Val(), "\n", runningParts)
	require.Len(t, run, runningParts)
	assert.Equal(t, []string{q.proc, "1"}, run[:2])
	assert.NotEmpty(t, run[2], "its start")
	assert.Equal(t, []string{q.proc, "", "", "ten\nant"}, run[3:], "submitter, retention, batch and tenant (last: it may hold a newline)")

	info, err := q.Inspect(ctx, f.ID())
	require.NoError(t, err)
	assert.Equal(t, StateActive, info.State)
	assert.Equal(t, q.proc, info.Process)
	assert.Equal(t, 1, info.Attempt)
	listed, err := q.Tasks(ctx, StateActive, 0, 10)
	require.NoError(t, err)
	require.Len(t, listed, 1)
	assert.Equal(t, StateActive, listed[0].State)
	assert.Equal(t, q.proc, listed[0].Process)

	free()
	res, err := wait(t, f, 5*time.Second)
	require.NoError(t, err)
	assert.Equal(t, "r", string(res))
	stored = q.rdb.HGetAll(ctx, q.lay.task(f.ID())).Val()
	assert.Equal(t, "done", stored[fieldState])
	assert.Equal(t, "1", stored[fieldAttempts])
	for _, field := range []string{fieldOwner, fieldBegan, fieldPayload, fieldSubmitter} {
		assert.NotContains(t, stored, field, "a kept outcome needs no %s", field)
	}
	assert.False(t, q.rdb.HExists(ctx, q.lay.active, f.ID()).Val())
	assert.False(t, q.rdb.HExists(ctx, q.lay.tasksOf(f.ID()), f.ID()).Val(), "a finished task's record left tasks")
}

// Tasks that a process of the version before running attempts moved to
// active left in flight (state "active", owner and attempt in the hash,
// only the process in active) are still read: Inspect shows them, Cancel
// reaches them, a give-back returns one without using its attempt, and
// the reaper retries or cancels the others.
func TestTasksTheEarlierLayoutLeftInFlight(t *testing.T) {
	t.Parallel()
	q := open(t, redistest.Name(t), WithTTL(time.Second))
	ctx := testCtx(t, 30*time.Second)
	var fs []*Future
	for _, p := range []string{"a", "b", "c"} {
		f, err := q.Submit(ctx, []byte(p))
		require.NoError(t, err)
		fs = append(fs, f)
	}
	// A process "old" takes them, and they are rewritten as the earlier
	// take wrote them.
	const old = "old"
	l := q.lay
	redisNow := func() int64 { tm := q.rdb.Time(ctx).Val(); return tm.UnixMilli() }
	require.NoError(t, q.rdb.HSet(ctx, l.alive, old, redisNow()).Err())
	out, err := dequeueScript.Run(ctx, q.rdb, l.common(l.inflight(old)), l.commonArgs(old, 3, promoteLimit)...).Slice()
	require.NoError(t, err)
	require.Len(t, out, 2+3*takenFields, "the take: %v", out)
	for _, f := range fs {
		run := strings.SplitN(q.rdb.HGet(ctx, l.active, f.ID()).Val(), "\n", runningParts)
		require.Len(t, run, runningParts)
		toEarlierLayout(t, ctx, q.rdb, l, f.ID(), fieldState, "active", fieldAttempts, run[1], fieldOwner, old, fieldBegan, run[2])
		require.NoError(t, q.rdb.HSet(ctx, l.active, f.ID(), old).Err())
	}

	info, err := q.Inspect(ctx, fs[0].ID())
	require.NoError(t, err)
	assert.Equal(t, StateActive, info.State)
	assert.Equal(t, old, info.Process)
	assert.Equal(t, 1, info.Attempt)

	// b: cancelled while it runs, recorded when "old" is reaped.
	require.NoError(t, q.Cancel(ctx, fs[1].ID()))
	info, err = q.Inspect(ctx, fs[1].ID())
	require.NoError(t, err)
	assert.Equal(t, StateActive, info.State, "a running task's cancel is a request")
	assert.Equal(t, "1", storedTask(t, ctx, q.rdb, l, fs[1].ID())[fieldCancel])
	// c: given back, its attempt not used.
	n, err := deregisterScript.Run(ctx, q.rdb, l.common(l.inflight(old), l.drains), l.commonArgs(old, "0", fs[2].ID())...).Int64()
	require.NoError(t, err)
	assert.Equal(t, int64(1), n)

	// "old" stops answering: the reaper of a serving process declares it
	// dead, and a retries with its first attempt counted.
	require.NoError(t, q.rdb.HSet(ctx, l.alive, old, redisNow()-60_000).Err())
	serve(t, q, echo, WithWorkers(2))
	res, err := wait(t, fs[0], 10*time.Second)
	require.NoError(t, err)
	assert.Equal(t, "a#2", string(res))
	_, err = wait(t, fs[1], 10*time.Second)
	var te *TaskError
	require.ErrorAs(t, err, &te)
	assert.True(t, te.Cancelled)
	res, err = wait(t, fs[2], 10*time.Second)
	require.NoError(t, err)
	assert.Equal(t, "c#1", string(res))
	for _, f := range fs {
		assert.NotContains(t, q.rdb.HGetAll(ctx, l.task(f.ID())).Val()[fieldOwner], old)
	}
	st, err := q.Stats(ctx)
	require.NoError(t, err)
	assert.Zero(t, st.InFlight)
}

// A task an earlier version took and left in flight, reaped at its last
// attempt in one call that adds the attempt's error and files the dead
// letter, keeps that error and its payload.
func TestAnEarlierVersionsTaskReapedAtItsLastAttempt(t *testing.T) {
	t.Parallel()
	q := open(t, redistest.Name(t), WithTTL(time.Second))
	ctx := testCtx(t, 30*time.Second)
	f, err := q.Submit(ctx, []byte("last"), WithMaxAttempts(1))
	require.NoError(t, err)
	const old = "old"
	l := q.lay
	redisNow := func() int64 { tm := q.rdb.Time(ctx).Val(); return tm.UnixMilli() }
	require.NoError(t, q.rdb.HSet(ctx, l.alive, old, redisNow()).Err())
	out, err := dequeueScript.Run(ctx, q.rdb, l.common(l.inflight(old)), l.commonArgs(old, 1, promoteLimit)...).Slice()
	require.NoError(t, err)
	require.Len(t, out, 2+takenFields)
	run := strings.SplitN(q.rdb.HGet(ctx, l.active, f.ID()).Val(), "\n", runningParts)
	toEarlierLayout(t, ctx, q.rdb, l, f.ID(), fieldState, "active", fieldAttempts, run[1], fieldOwner, old, fieldBegan, run[2])
	require.NoError(t, q.rdb.HSet(ctx, l.active, f.ID(), old).Err())

	require.NoError(t, q.rdb.HSet(ctx, l.alive, old, redisNow()-60_000).Err())
	serve(t, q, echo, WithWorkers(1))
	_, err = wait(t, f, 10*time.Second)
	var te *TaskError
	require.ErrorAs(t, err, &te)
	letter := q.rdb.HGetAll(ctx, l.task(f.ID())).Val()
	assert.Equal(t, "dead", letter[fieldState])
	assert.Equal(t, "last", letter[fieldPayload])
	assert.Contains(t, letter[fieldErrors], "stopped answering")
	assert.Zero(t, records(t, ctx, q.rdb, l))
}
