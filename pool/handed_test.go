package pool

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/shepherd-go/shepherd/internal/redistest"
	"github.com/shepherd-go/shepherd/internal/streamfields"
)

// warmUp dispatches a first job through n, once n's slot table names a
// worker for it: that worker learns Redis's clock from its claim, and
// the jobs after it are handed to it.
func warmUp(t *testing.T, ctx context.Context, n *Node) {
	t.Helper()
	require.Eventually(t, func() bool { return n.table().owner("warm") != "" }, 10*time.Second, 5*time.Millisecond)
	require.NoError(t, n.DispatchJob(ctx, "warm", nil))
}

// A dispatch routed to a live worker with a clock is handed to it: its
// admission is the only script call (issue #41), the worker answers the
// dispatcher with a plain reply entry, and the record it wrote stays.
func TestAHandedDispatchCostsOneScriptCall(t *testing.T) {
	t.Parallel()
	ctx := testCtx(t, 30*time.Second)
	hook := newScriptCounter()
	rdb := srv.NewClient()
	rdb.AddHook(hook)
	t.Cleanup(func() { _ = rdb.Close() })
	n := addNode(t, rdb, redistest.Name(t))
	rec := newRecorder()
	addWorkers(t, n, rec, 1)
	warmUp(t, ctx, n)

	hook.reset()
	const jobs = 20
	for i := range jobs {
		require.NoError(t, n.DispatchJob(ctx, keyN(i), []byte("payload")))
	}
	hook.mu.Lock()
	calls := map[string]int{}
	for k, v := range hook.calls {
		calls[k] = v
	}
	hook.mu.Unlock()
	assert.Equal(t, jobs, calls["admit"], "script calls: %v", calls)
	assert.Zero(t, calls["started"]+calls["claim"], "script calls: %v", calls)
	for i := range jobs {
		assert.Equal(t, 1, rec.runningKeys()[keyN(i)], keyN(i))
		raw, err := rdb.HGet(ctx, n.lay.jobs, keyN(i)).Result()
		require.NoError(t, err)
		r := mustParse(t, raw)
		assert.True(t, r.Pending && r.State == stateRunning, "%s: %q", keyN(i), raw)
	}
	st, err := n.Stats(ctx)
	require.NoError(t, err)
	assert.EqualValues(t, jobs+1, st.Started, "a handed job counts as started at its admission")
}

// A stop of a handed job that reaches the worker before its Start ran
// follows the start in the worker's stream: the job starts (its
// DispatchJob says so), then stops (its StopJob says so), and nothing is
// left.
func TestAStopOfAHandedJobFollowsItsStart(t *testing.T) {
	t.Parallel()
	ctx := testCtx(t, 30*time.Second)
	n := addNode(t, srv.Client(), redistest.Name(t))
	h := &gatedStart{recorder: newRecorder(), entered: make(chan struct{}), gate: make(chan struct{})}
	addWorkers(t, n, h, 1)
	t.Cleanup(func() {
		select {
		case <-h.gate:
		default:
			close(h.gate)
		}
	})
	first := make(chan error, 1)
	go func() { first <- n.DispatchJob(ctx, "first", nil) }()
	awaitSignal(t, h.entered, "the first Start")
	// The worker is busy: the second job, handed to it, waits in its
	// stream, and its record already says it runs.
	second := make(chan error, 1)
	go func() { second <- n.DispatchJob(ctx, "second", nil) }()
	require.Eventually(t, func() bool {
		raw, err := n.rdb.HGet(ctx, n.lay.jobs, "second").Result()
		return err == nil && mustParse(t, raw).Pending
	}, 10*time.Second, 5*time.Millisecond)
	stopped := make(chan error, 1)
	go func() { stopped <- n.StopJob(ctx, "second") }()
	require.Eventually(t, func() bool { return recordState(ctx, n, "second") == stateStopping }, 10*time.Second, 5*time.Millisecond)
	close(h.gate)
	require.NoError(t, <-first)
	require.NoError(t, <-second, "its Start succeeded")
	require.NoError(t, <-stopped)
	_, err := n.Job(ctx, "second")
	assert.ErrorIs(t, err, ErrJobNotFound)
	assert.Zero(t, h.runningKeys()["second"])
	h.mu.Lock()
	assert.Equal(t, 1, h.starts["second"])
	h.mu.Unlock()
}

// A Start that fails after its job was handed to the worker fails its
// dispatch with the error, deletes the job, and takes back the start its
// admission counted.
func TestAHandedJobsFailedStartFailsItsDispatch(t *testing.T) {
	t.Parallel()
	ctx := testCtx(t, 30*time.Second)
	n := addNode(t, srv.Client(), redistest.Name(t))
	addWorkers(t, n, startFunc(func(_ context.Context, job *Job) error {
		if job.Key == "bad" {
			return assert.AnError
		}
		return nil
	}), 1)
	warmUp(t, ctx, n)
	before := n.test.claimsSkipped.Load()
	err := n.DispatchJob(ctx, "bad", nil)
	var se *StartError
	require.ErrorAs(t, err, &se)
	assert.Contains(t, se.Msg, assert.AnError.Error())
	assert.Greater(t, n.test.claimsSkipped.Load(), before, "the job was handed")
	_, err = n.Job(ctx, "bad")
	assert.ErrorIs(t, err, ErrJobNotFound)
	st, err := n.Stats(ctx)
	require.NoError(t, err)
	assert.EqualValues(t, 1, st.Started)
	assert.EqualValues(t, 1, st.StartsFailed)
}

// The same for a job handed to its worker, whose record does not name
// its dispatcher: the start that takes over answers nobody, and the
// dispatcher, waiting longer than WorkerTTL, reads the job's record and
// finds it running (checkWaits).
func TestDispatchOfAHandedJobAnsweredWhenItsWorkerDies(t *testing.T) {
	t.Parallel()
	pool := redistest.Name(t)
	client := addNode(t, srv.NewClient(), pool, WithClientOnly())
	doomed := addNode(t, srv.NewClient(), pool)
	slow := newRecorder()
	addWorkers(t, doomed, slow, 1)
	ctx := testCtx(t, 30*time.Second)
	warmUp(t, ctx, client)
	slow.mu.Lock()
	slow.startDelay = 500 * time.Millisecond
	slow.mu.Unlock()

	skipped := doomed.test.claimsSkipped.Load()
	done := make(chan error, 1)
	go func() { done <- client.DispatchJob(ctx, "k", []byte("v")) }()
	require.Eventually(t, func() bool { return doomed.test.claimsSkipped.Load() > skipped },
		10*time.Second, 5*time.Millisecond, "the job was not handed to its worker")
	go doomed.crash()

	takeOver(t, pool, "k", done)
}

// A handed job's answer that finds its dispatcher's stream gone (the pool
// declared the dispatching node dead) is recorded instead (answerLost):
// the node, when it rejoins, reads from the record that the job runs.
func TestARevivedNodeLearnsThatItsHandedJobStarted(t *testing.T) {
	t.Parallel()
	ctx := testCtx(t, 30*time.Second)
	name := redistest.Name(t)
	rdb := srv.Client()
	host := addNode(t, rdb, name)
	entered, gate := make(chan struct{}), make(chan struct{})
	addWorkers(t, host, startFunc(func(_ context.Context, job *Job) error {
		if job.Key == "k" {
			close(entered)
			<-gate
		}
		return nil
	}), 1)
	t.Cleanup(func() {
		select {
		case <-gate:
		default:
			close(gate)
		}
	})
	caller := addNode(t, rdb, name, WithClientOnly())
	warmUp(t, ctx, caller)
	skipped := host.test.claimsSkipped.Load()
	done := make(chan error, 1)
	go func() { done <- caller.DispatchJob(ctx, "k", nil) }()
	awaitSignal(t, entered, "k's Start")
	require.Greater(t, host.test.claimsSkipped.Load(), skipped, "k was not handed to its worker")

	caller.pauseKeepAlive(true)
	require.Eventually(t, func() bool {
		n, err := rdb.Exists(ctx, caller.nodeStream.Key()).Result()
		return err == nil && n == 0
	}, 10*time.Second, 20*time.Millisecond, "the silent node was not removed")
	close(gate) // Start succeeds; its answer finds no stream
	require.Eventually(t, func() bool {
		raw, err := rdb.HGet(ctx, host.lay.jobs, "k").Result()
		if err != nil {
			return false
		}
		r := mustParse(t, raw)
		return r.State == stateRunning && !r.Pending
	}, 10*time.Second, 10*time.Millisecond, "the lost answer's start was not recorded")
	caller.pauseKeepAlive(false)
	select {
	case err := <-done:
		require.NoError(t, err, "the job runs: DispatchJob must say so")
	case <-time.After(5 * time.Second):
		t.Fatal("DispatchJob still waits after its node rejoined")
	}
}

// A start event of a job the worker already runs in that generation (a
// reconciliation after a failover started the handed job from its
// record before its start event came) answers the dispatcher that waits
// for it: dropped without an answer, it left the first DispatchJob
// after a Redis restart waiting for its ctx (seen in
// TestRedisRestartWithAOFLosesNoJob, about one run in three).
func TestARepeatedStartOfARunningJobAnswersItsDispatcher(t *testing.T) {
	t.Parallel()
	ctx := testCtx(t, 30*time.Second)
	n := addNode(t, srv.Client(), redistest.Name(t))
	rec := newRecorder()
	w := addWorkers(t, n, rec, 1)[0]
	warmUp(t, ctx, n)
	require.NoError(t, n.DispatchJob(ctx, "k", []byte("v")))
	raw, err := n.rdb.HGet(ctx, n.lay.jobs, "k").Result()
	require.NoError(t, err)
	r := mustParse(t, raw)
	// Handed: its record does not say who waits, and checkWaits leaves
	// its dispatcher waiting.
	require.True(t, r.Pending, "%q", raw)

	reqID, answer := n.await(opDispatch, "k", r.Nonce)
	h := fmt.Sprintf("%s %d %s %s\n%d \nv", r.Nonce, r.Gen, n.id, reqID, r.Created)
	require.NoError(t, n.rdb.XAdd(ctx, &redis.XAddArgs{Stream: w.stream.Key(),
		Values: []any{streamfields.Event, evStart, streamfields.Topic, "k", streamfields.Payload, h}}).Err())
	select {
	case p := <-answer:
		require.NoError(t, replyError("k", p))
	case <-time.After(10 * time.Second):
		t.Fatal("the repeated start's dispatcher was not answered")
	}
	rec.mu.Lock()
	assert.Equal(t, 1, rec.starts["k"], "the job is not started again")
	rec.mu.Unlock()
}
