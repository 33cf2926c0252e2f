package pool

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/shepherd-go/shepherd/internal/redistest"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestInspectJobOfARunningJob(t *testing.T) {
	t.Parallel()
	ctx := testCtx(t, 30*time.Second)
	name := redistest.Name(t)
	n := addNode(t, srv.Client(), name)
	w := addWorkers(t, n, newRecorder(), 1)[0]
	before, err := srv.Client().Time(ctx).Result()
	require.NoError(t, err)
	require.NoError(t, n.DispatchJob(ctx, "tenant-42", []byte("config v1")))

	ji, err := n.Job(ctx, "tenant-42")
	require.NoError(t, err)
	assert.Equal(t, name, ji.Pool)
	assert.Equal(t, "tenant-42", ji.Key)
	assert.Equal(t, JobRunning, ji.State)
	assert.Equal(t, w.ID(), ji.Worker)
	assert.Equal(t, n.ID(), ji.Node)
	assert.True(t, ji.WorkerHealthy)
	assert.Equal(t, int64(1), ji.Generation)
	assert.Equal(t, 1, ji.Attempt)
	assert.Equal(t, []byte("config v1"), ji.Payload)
	assert.Equal(t, len("config v1"), ji.PayloadSize)
	assert.Empty(t, ji.LastError)
	// Redis's clock, in milliseconds: created, then started, then read.
	assert.False(t, ji.Created.Before(before.Truncate(time.Millisecond)), "created %v before the dispatch at %v", ji.Created, before)
	assert.False(t, ji.Started.Before(ji.Created))
	assert.False(t, ji.Time.Before(ji.Started))
	assert.Less(t, ji.Time.Sub(ji.Created), 10*time.Second)
	assert.Equal(t, ji.Started, ji.Changed, "a running job last changed when its Start succeeded")

	// InspectJob reads the same without a node.
	ins, err := InspectJob(ctx, srv.Client(), name, "tenant-42")
	require.NoError(t, err)
	assert.Equal(t, ji.Started, ins.Started)
	assert.Equal(t, ji.Worker, ins.Worker)
	assert.True(t, ins.WorkerHealthy)

	// The dashboard reads these names.
	b, err := json.Marshal(ji)
	require.NoError(t, err)
	for _, field := range []string{`"state":"running"`, `"worker_healthy":true`, `"attempt":1`, `"payload_size":9`, `"generation":1`} {
		assert.Contains(t, string(b), field)
	}
	assert.NotContains(t, string(b), `"last_error"`)
}

func TestInspectJobOfAQueuedJob(t *testing.T) {
	t.Parallel()
	ctx := testCtx(t, 30*time.Second)
	name := redistest.Name(t)
	n := addNode(t, srv.Client(), name) // routes, but has no worker
	dctx, cancel := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- n.DispatchJob(dctx, "waiting", []byte("p")) }()

	var ji *JobInfo
	require.Eventually(t, func() bool {
		var err error
		ji, err = InspectJob(ctx, srv.Client(), name, "waiting")
		return err == nil
	}, 10*time.Second, 10*time.Millisecond)
	assert.Equal(t, JobQueued, ji.State)
	assert.Empty(t, ji.Worker)
	assert.Empty(t, ji.Node)
	assert.False(t, ji.WorkerHealthy)
	assert.Zero(t, ji.Attempt)
	assert.True(t, ji.Started.IsZero())
	assert.Equal(t, ji.Created, ji.Changed, "queued when created")
	assert.Equal(t, 1, ji.PayloadSize)

	cancel()
	require.ErrorIs(t, <-done, context.Canceled)
	require.Eventually(t, func() bool {
		_, err := InspectJob(ctx, srv.Client(), name, "waiting")
		return err != nil && errors.Is(err, ErrJobNotFound)
	}, 10*time.Second, 20*time.Millisecond, "the withdrawn dispatch left its job")
}

// A Start that fails after a move queues the job again: InspectJob shows
// the error until the job ends, and how often it was tried.
func TestInspectJobAfterAStartFailedAfterAMove(t *testing.T) {
	t.Parallel()
	ctx := testCtx(t, 30*time.Second)
	name := redistest.Name(t)
	n := addNode(t, srv.Client(), name)
	first := addWorkers(t, n, newRecorder(), 1)[0]
	require.NoError(t, n.DispatchJob(ctx, "k", []byte("payload")))
	failing := newRecorder()
	failing.failKeys["k"] = true
	second := addWorkers(t, n, failing, 1)[0]
	require.NoError(t, n.RemoveWorker(ctx, first)) // "k" moves to second, if it did not already

	// Wait for two failed Starts to be recorded: Attempt counts claims, so
	// at Attempt 3 the third Start may still run and the second failure
	// be the only one counted (a check on Attempt alone failed so).
	var ji *JobInfo
	var st *Stats
	require.Eventually(t, func() bool {
		var err error
		ji, err = n.Job(ctx, "k")
		require.NoError(t, err, "a failed Start after a move keeps the job")
		st, err = n.Stats(ctx)
		require.NoError(t, err)
		return ji.LastError != "" && ji.Attempt >= 3 && st.StartsFailed >= 2
	}, 10*time.Second, 10*time.Millisecond)
	assert.Equal(t, errTestStart.Error(), ji.LastError)
	assert.Contains(t, []JobState{JobQueued, JobRouted, JobStarting}, ji.State)
	assert.True(t, ji.Started.IsZero(), "not running")
	assert.GreaterOrEqual(t, ji.Generation, int64(3))
	assert.Equal(t, int64(1), st.Started, "only the first Start succeeded")

	failing.mu.Lock()
	delete(failing.failKeys, "k")
	failing.mu.Unlock()
	require.Eventually(t, func() bool {
		var err error
		ji, err = n.Job(ctx, "k")
		require.NoError(t, err)
		return ji.State == JobRunning
	}, 10*time.Second, 10*time.Millisecond)
	assert.Equal(t, second.ID(), ji.Worker)
	assert.Equal(t, errTestStart.Error(), ji.LastError, "kept until the job ends")
	assert.False(t, ji.Started.IsZero())
	assert.Equal(t, ji.Started, ji.Changed)
	assert.Equal(t, []byte("payload"), ji.Payload)
}

func TestInspectJobErrors(t *testing.T) {
	t.Parallel()
	ctx := testCtx(t, 30*time.Second)
	name := redistest.Name(t)
	n := addNode(t, srv.Client(), name)
	addWorkers(t, n, newRecorder(), 1)

	_, err := InspectJob(ctx, srv.Client(), name, "never")
	assert.ErrorIs(t, err, ErrJobNotFound)
	_, err = n.Job(ctx, "never")
	assert.ErrorIs(t, err, ErrJobNotFound)
	_, err = n.Job(ctx, "")
	assert.ErrorIs(t, err, ErrInvalidKey)
	_, err = InspectJob(ctx, srv.Client(), name, strings.Repeat("k", MaxKeySize+1))
	assert.ErrorIs(t, err, ErrInvalidKey)
	_, err = InspectJob(ctx, nil, name, "k")
	assert.ErrorIs(t, err, ErrInvalidOption)
	_, err = InspectJob(ctx, srv.Client(), "a}b", "k")
	assert.ErrorIs(t, err, ErrInvalidOption)

	// A stopped job is gone.
	require.NoError(t, n.DispatchJob(ctx, "k", nil))
	_, err = n.Job(ctx, "k")
	require.NoError(t, err)
	require.NoError(t, n.StopJob(ctx, "k"))
	_, err = n.Job(ctx, "k")
	assert.ErrorIs(t, err, ErrJobNotFound)

	require.NoError(t, n.Close(ctx))
	_, err = n.Job(ctx, "k")
	assert.ErrorIs(t, err, ErrNodeClosed)
}

// A record written before Started and LastErr existed reads as it did.
func TestInspectJobReadsOldRecords(t *testing.T) {
	t.Parallel()
	ctx := testCtx(t, 10*time.Second)
	name := redistest.Name(t)
	lay, err := poolLayout(srv.Client(), name)
	require.NoError(t, err)
	t.Cleanup(func() { srv.Client().Del(context.Background(), lay.jobs, lay.payloads) })
	require.NoError(t, srv.Client().HSet(ctx, lay.jobs, "old",
		`{"s":"run","g":2,"n":"abc","w":"w1","c":1700000000000,"a":2}`).Err())

	ji, err := InspectJob(ctx, srv.Client(), name, "old")
	require.NoError(t, err)
	assert.Equal(t, JobRunning, ji.State)
	assert.Equal(t, "w1", ji.Worker)
	assert.Empty(t, ji.Node, "w1 is not registered")
	assert.False(t, ji.WorkerHealthy)
	assert.Equal(t, 2, ji.Attempt)
	assert.Equal(t, time.UnixMilli(1700000000000), ji.Created)
	assert.True(t, ji.Started.IsZero())
	assert.True(t, ji.Changed.IsZero())
	assert.Zero(t, ji.PayloadSize)
	assert.Empty(t, ji.LastError)
}

func TestTruncateUTF8(t *testing.T) {
	t.Parallel()
	assert.Equal(t, "abc", truncateUTF8("abc", 5))
	assert.Equal(t, "ab", truncateUTF8("abc", 2))
	assert.Equal(t, "a", truncateUTF8("aé", 2), "never half a rune")
	long := strings.Repeat("é", maxLastErrorSize)
	got := truncateUTF8(long, maxLastErrorSize)
	assert.Len(t, got, maxLastErrorSize)
	assert.True(t, strings.HasPrefix(long, got))
}

func TestJobKeysWithoutJoining(t *testing.T) {
	t.Parallel()
	ctx := testCtx(t, 30*time.Second)
	name := redistest.Name(t)
	n := addNode(t, srv.Client(), name)
	addWorkers(t, n, newRecorder(), 1)
	for _, k := range []string{"b", "a", "c/d"} {
		require.NoError(t, n.DispatchJob(ctx, k, nil))
	}
	keys, err := JobKeys(ctx, srv.Client(), name)
	require.NoError(t, err)
	assert.Equal(t, []string{"a", "b", "c/d"}, keys)
	own, err := n.JobKeys(ctx)
	require.NoError(t, err)
	assert.Equal(t, keys, own)

	keys, err = JobKeys(ctx, srv.Client(), name+"-none")
	require.NoError(t, err)
	assert.Empty(t, keys)
	_, err = JobKeys(ctx, srv.Client(), "a}b")
	assert.ErrorIs(t, err, ErrInvalidOption)
	_, err = JobKeys(ctx, nil, name)
	assert.ErrorIs(t, err, ErrInvalidOption)
}
