package pool

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/shepherd-go/shepherd/internal/redistest"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// gatedRecorder holds the Stop of key "gate" until the pool holds want
// job records (or a second passed): the worker's loop is busy meanwhile,
// so the start events behind it pile up in the worker's channel and are
// started as batches. (A slow Stop, unlike a slow Start, leaves the
// worker's estimate of Start's duration, and so the batch size, alone.)
type gatedRecorder struct {
	*recorder
	n    *Node
	want int64
}

func (g *gatedRecorder) Stop(ctx context.Context, key string) error {
	if key == "gate" {
		deadline := time.Now().Add(time.Second)
		for time.Now().Before(deadline) {
			l, err := g.n.rdb.HLen(ctx, g.n.lay.jobs).Result()
			if err == nil && l >= g.want {
				break
			}
			time.Sleep(5 * time.Millisecond) // polling interval, not synchronization
		}
	}
	return g.recorder.Stop(ctx, key)
}

// Batched starts answer each DispatchJob with its own outcome: a failing
// Start in the middle of a batch fails its dispatch only.
func TestBatchedStartsAnswerEachDispatcher(t *testing.T) {
	t.Parallel()
	n := addNode(t, srv.Client(), redistest.Name(t))
	const jobs = 120
	rec := newRecorder()
	for i := 0; i < jobs; i += 5 {
		rec.failKeys[fmt.Sprintf("k-%03d", i)] = true
	}
	h := &gatedRecorder{recorder: rec, n: n, want: 1 + jobs/2}
	addWorkers(t, n, h, 1)
	ctx := testCtx(t, 30*time.Second)

	require.NoError(t, n.DispatchJob(ctx, "gate", nil))
	gate := make(chan error, 1)
	go func() { gate <- n.StopJob(ctx, "gate") }()
	require.Eventually(t, func() bool { return recordState(ctx, n, "gate") == "x" },
		10*time.Second, 5*time.Millisecond, "the gate's stop was never sent")

	errs := make([]error, jobs)
	var wg sync.WaitGroup
	for i := range jobs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			errs[i] = n.DispatchJob(ctx, fmt.Sprintf("k-%03d", i), []byte{byte(i)})
		}()
	}
	wg.Wait()
	require.NoError(t, <-gate)

	var want []string
	for i, err := range errs {
		key := fmt.Sprintf("k-%03d", i)
		if rec.failKeys[key] {
			var se *StartError
			require.ErrorAs(t, err, &se, key)
			assert.Equal(t, key, se.Key)
			continue
		}
		require.NoError(t, err, key)
		want = append(want, key)
	}
	keys, err := n.JobKeys(ctx)
	require.NoError(t, err)
	assert.ElementsMatch(t, want, keys)
	running := rec.runningKeys()
	for _, k := range want {
		assert.Equal(t, 1, running[k], "%s runs once", k)
	}
	assert.Len(t, running, len(want))
	assert.Positive(t, n.test.startBatches.Load(), "no batch of starts formed")
	assert.Zero(t, n.admitting.Load(), "every admission was counted out")
}

// A DispatchJob that gives up while its admission waits on a hung Redis
// leaves nothing behind: the job is withdrawn once the admission ran.
func TestDispatchGivenUpDuringAdmissionLeavesNothing(t *testing.T) {
	t.Parallel()
	s := redistest.Start(t)
	n := addNode(t, s.NewClient(), redistest.Name(t)) // no worker: a job waits
	require.NoError(t, s.Freeze())
	thawed := false
	defer func() {
		if !thawed {
			_ = s.Thaw()
		}
	}()
	ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
	defer cancel()
	err := n.DispatchJob(ctx, "k", nil)
	require.ErrorIs(t, err, context.DeadlineExceeded)
	require.NoError(t, s.Thaw())
	thawed = true

	// The admission ran once Redis came back (the job exists, queued: no
	// worker), then the withdrawal removed it.
	requireWithdrawn(t, n)
}

// requireWithdrawn waits until the pool of n, which has no worker yet,
// holds no job, then checks that a worker arriving starts only a new job:
// nothing a withdrawn dispatch left behind.
func requireWithdrawn(t *testing.T, n *Node) {
	t.Helper()
	ctx := testCtx(t, 20*time.Second)
	require.Eventually(t, func() bool {
		keys, err := n.JobKeys(ctx)
		return err == nil && len(keys) == 0
	}, 15*time.Second, 20*time.Millisecond, "the given-up job was left in the pool")
	rec := newRecorder()
	addWorkers(t, n, rec, 1)
	require.NoError(t, n.DispatchJob(ctx, "other", nil))
	assert.Equal(t, map[string]int{"other": 1}, rec.runningKeys())
}

// A DispatchJob that gives up after an admitter took its admission, but
// before the admission ran, has its job withdrawn after the admission, not
// before (which would find nothing and leave the job to run).
func TestDispatchGivenUpBeforeItsAdmissionRanLeavesNothing(t *testing.T) {
	t.Parallel()
	release := make(chan struct{})
	var once sync.Once
	n, err := AddNode(testCtx(t, 10*time.Second), srv.Client(), redistest.Name(t), fastOpts()...)
	require.NoError(t, err)
	ran := make(chan struct{})
	var ranOnce sync.Once
	n.test.admitHook = func(after bool) {
		if after {
			ranOnce.Do(func() { close(ran) })
			return
		}
		<-release
	}
	t.Cleanup(func() {
		once.Do(func() { close(release) })
		_ = n.Close(context.Background())
	})
	// Another admission "under way" sends this one to the admitters.
	n.admitting.Add(1)
	defer n.admitting.Add(-1)
	ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
	defer cancel()
	require.ErrorIs(t, n.DispatchJob(ctx, "k", nil), context.DeadlineExceeded)
	keys, err := n.JobKeys(testCtx(t, 5*time.Second))
	require.NoError(t, err)
	require.Empty(t, keys, "the admission ran before its hook returned")
	once.Do(func() { close(release) })
	awaitSignal(t, ran, "ran")

	// Had the withdrawal come first, the job would now be admitted and
	// start on the worker requireWithdrawn adds.
	requireWithdrawn(t, n)
}
