package pool

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/shepherd-go/shepherd/internal/redistest"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestDispatchStopNotify(t *testing.T) {
	t.Parallel()
	pool := redistest.Name(t)
	n := addNode(t, srv.Client(), pool)
	rec := newRecorder()
	addWorkers(t, n, rec, 2)
	ctx := testCtx(t, 20*time.Second)

	require.NoError(t, n.DispatchJob(ctx, "a", []byte("payload-a")))
	assert.Equal(t, map[string]int{"a": 1}, rec.runningKeys())
	assert.ErrorIs(t, n.DispatchJob(ctx, "a", nil), ErrJobExists)

	keys, err := n.JobKeys(ctx)
	require.NoError(t, err)
	assert.Equal(t, []string{"a"}, keys)

	require.NoError(t, n.NotifyWorker(ctx, "a", []byte("hello")))
	rec.mu.Lock()
	assert.Equal(t, [][]byte{[]byte("hello")}, rec.notified["a"])
	rec.mu.Unlock()

	require.NoError(t, n.StopJob(ctx, "a"))
	assert.Empty(t, rec.runningKeys())
	assert.ErrorIs(t, n.StopJob(ctx, "a"), ErrJobNotFound)
	assert.ErrorIs(t, n.NotifyWorker(ctx, "a", nil), ErrJobNotFound)
	keys, err = n.JobKeys(ctx)
	require.NoError(t, err)
	assert.Empty(t, keys)
}

func TestDispatchManyJobsAcrossNodesStartsEachOnce(t *testing.T) {
	t.Parallel()
	pool := redistest.Name(t)
	r1, r2, r3 := newRecorder(), newRecorder(), newRecorder()
	n1 := addNode(t, srv.Client(), pool)
	n2 := addNode(t, srv.NewClient(), pool)
	n3 := addNode(t, srv.NewClient(), pool)
	addWorkers(t, n1, r1, 2)
	addWorkers(t, n2, r2, 2)
	addWorkers(t, n3, r3, 2)
	ctx := testCtx(t, 60*time.Second)

	const jobs = 1000
	nodes := []*Node{n1, n2, n3}
	errs := make(chan error, jobs)
	sem := make(chan struct{}, 32)
	for i := 0; i < jobs; i++ {
		sem <- struct{}{}
		go func(i int) {
			defer func() { <-sem }()
			errs <- nodes[i%3].DispatchJob(ctx, keyN(i), []byte("p"))
		}(i)
	}
	for i := 0; i < jobs; i++ {
		require.NoError(t, <-errs)
	}
	all := union(r1, r2, r3)
	assert.Len(t, all, jobs)
	for k, c := range all {
		assert.Equal(t, 1, c, "job %s runs %d times", k, c)
	}
	var starts int
	for _, r := range []*recorder{r1, r2, r3} {
		r.mu.Lock()
		for _, c := range r.starts {
			starts += c
		}
		r.mu.Unlock()
	}
	assert.Equal(t, jobs, starts, "each Start is called exactly once")
	for _, r := range []*recorder{r1, r2, r3} {
		assert.NotEmpty(t, r.runningKeys(), "every node gets a share")
	}
}

func TestConcurrentDispatchOfOneKeyFromFiveNodes(t *testing.T) {
	t.Parallel()
	pool := redistest.Name(t)
	rec := newRecorder()
	var nodes []*Node
	for i := 0; i < 5; i++ {
		n := addNode(t, srv.NewClient(), pool)
		nodes = append(nodes, n)
	}
	addWorkers(t, nodes[0], rec, 2)
	ctx := testCtx(t, 20*time.Second)
	for round := 0; round < 10; round++ {
		key := keyN(round)
		errs := make(chan error, len(nodes))
		for _, n := range nodes {
			go func(n *Node) { errs <- n.DispatchJob(ctx, key, nil) }(n)
		}
		ok, exists := 0, 0
		for range nodes {
			err := <-errs
			switch {
			case err == nil:
				ok++
			case errors.Is(err, ErrJobExists):
				exists++
			default:
				t.Fatalf("unexpected error: %v", err)
			}
		}
		assert.Equal(t, 1, ok, "exactly one dispatch of %s succeeds", key)
		assert.Equal(t, 4, exists)
	}
	for k, c := range rec.runningKeys() {
		assert.Equal(t, 1, c, "job %s runs %d times", k, c)
	}
}

func TestStartErrorIsReturnedAndJobNotKept(t *testing.T) {
	t.Parallel()
	n := addNode(t, srv.Client(), redistest.Name(t))
	rec := newRecorder()
	rec.failKeys["bad"] = true
	addWorkers(t, n, rec, 1)
	ctx := testCtx(t, 20*time.Second)

	err := n.DispatchJob(ctx, "bad", nil)
	var se *StartError
	require.ErrorAs(t, err, &se)
	assert.Equal(t, "bad", se.Key)
	assert.Contains(t, se.Msg, errTestStart.Error())
	keys, err := n.JobKeys(ctx)
	require.NoError(t, err)
	assert.Empty(t, keys, "a job whose Start failed is not recorded")

	// The key can be dispatched again once Start works.
	rec.mu.Lock()
	delete(rec.failKeys, "bad")
	rec.mu.Unlock()
	require.NoError(t, n.DispatchJob(ctx, "bad", nil))
}

func TestPanickingHandlersAreRecovered(t *testing.T) {
	t.Parallel()
	n := addNode(t, srv.Client(), redistest.Name(t))
	rec := newRecorder()
	addWorkers(t, n, rec, 1)
	ctx := testCtx(t, 20*time.Second)

	rec.mu.Lock()
	rec.panicOn = "start"
	rec.mu.Unlock()
	var se *StartError
	require.ErrorAs(t, n.DispatchJob(ctx, "p1", nil), &se)
	assert.Contains(t, se.Msg, "panicked")

	rec.mu.Lock()
	rec.panicOn = "notify"
	rec.mu.Unlock()
	require.NoError(t, n.DispatchJob(ctx, "p2", nil))
	err := n.NotifyWorker(ctx, "p2", []byte("x"))
	require.Error(t, err)
	assert.Contains(t, err.Error(), "panicked")

	rec.mu.Lock()
	rec.panicOn = "stop"
	rec.mu.Unlock()
	err = n.StopJob(ctx, "p2")
	require.Error(t, err)
	assert.Contains(t, err.Error(), "panicked")
	keys, err := n.JobKeys(ctx)
	require.NoError(t, err)
	assert.Empty(t, keys, "the job is deleted even though Stop panicked")

	// The node still works.
	rec.mu.Lock()
	rec.panicOn = ""
	rec.mu.Unlock()
	require.NoError(t, n.DispatchJob(ctx, "p3", nil))
}

func TestBadInput(t *testing.T) {
	t.Parallel()
	ctx := testCtx(t, 20*time.Second)
	_, err := AddNode(ctx, nil, "p")
	assert.ErrorIs(t, err, ErrInvalidOption)
	_, err = AddNode(ctx, srv.Client(), "")
	assert.ErrorIs(t, err, ErrInvalidOption)
	_, err = AddNode(ctx, srv.Client(), "a}b")
	assert.ErrorIs(t, err, ErrInvalidOption)
	for _, opt := range []NodeOption{WithWorkerTTL(0), WithPendingJobTTL(-1), WithWorkerShutdownTTL(0),
		WithMaxQueuedJobs(0), WithJobSinkBlockDuration(0), WithLogger(nil), WithMaxPayloadSize(0), nil} {
		_, err = AddNode(ctx, srv.Client(), "p", opt)
		assert.ErrorIs(t, err, ErrInvalidOption)
	}

	n := addNode(t, srv.Client(), redistest.Name(t), WithMaxPayloadSize(10))
	assert.ErrorIs(t, n.DispatchJob(ctx, "", nil), ErrInvalidKey)
	assert.ErrorIs(t, n.DispatchJob(ctx, strings.Repeat("k", MaxKeySize+1), nil), ErrInvalidKey)
	assert.ErrorIs(t, n.DispatchJob(ctx, "k", make([]byte, 11)), ErrPayloadTooLarge)
	assert.ErrorIs(t, n.StopJob(ctx, ""), ErrInvalidKey)
	assert.ErrorIs(t, n.NotifyWorker(ctx, "", nil), ErrInvalidKey)
	_, err = n.AddWorker(ctx, nil)
	assert.ErrorIs(t, err, ErrInvalidOption)
	assert.ErrorIs(t, n.RemoveWorker(ctx, nil), ErrUnknownWorker)
	keys, err := n.JobKeys(ctx)
	require.NoError(t, err)
	assert.Empty(t, keys, "bad input leaves nothing behind")
}

func TestDispatchCancelledLeavesNothing(t *testing.T) {
	t.Parallel()
	n := addNode(t, srv.Client(), redistest.Name(t))
	// No worker: the job waits in the queue until ctx ends.
	ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
	defer cancel()
	err := n.DispatchJob(ctx, "waiting", nil)
	require.ErrorIs(t, err, context.DeadlineExceeded)
	// The withdrawal runs in the background, right after DispatchJob
	// returned; a worker arriving later does not start the withdrawn job.
	requireWithdrawn(t, n)
}

func TestPoolFullRejectsThenRecovers(t *testing.T) {
	t.Parallel()
	pool := redistest.Name(t)
	n := addNode(t, srv.Client(), pool, WithMaxQueuedJobs(3))
	ctx := testCtx(t, 30*time.Second)
	// No worker yet: dispatches queue up until the bound.
	errs := make(chan error, 3)
	for i := 0; i < 3; i++ {
		go func(i int) { errs <- n.DispatchJob(ctx, keyN(i), nil) }(i)
	}
	require.Eventually(t, func() bool {
		l, err := srv.Client().XLen(ctx, n.lay.jobStream).Result()
		return err == nil && l == 3
	}, 10*time.Second, 10*time.Millisecond)
	assert.ErrorIs(t, n.DispatchJob(ctx, "overflow", nil), ErrPoolFull)

	rec := newRecorder()
	addWorkers(t, n, rec, 1)
	for i := 0; i < 3; i++ {
		require.NoError(t, <-errs, "queued jobs start once a worker exists; none was trimmed")
	}
	require.NoError(t, n.DispatchJob(ctx, "overflow", nil), "dispatch works again after the queue drained")
	assert.Len(t, rec.runningKeys(), 4)
}
