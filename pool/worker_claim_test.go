package pool

import (
	"context"
	"fmt"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/shepherd-go/shepherd/internal/redistest"
)

// jobKeeper keeps the Job of every Start.
type jobKeeper struct {
	*recorder
	mu   sync.Mutex
	jobs map[string]Job
}

func (k *jobKeeper) Start(ctx context.Context, job *Job) error {
	k.mu.Lock()
	k.jobs[job.Key] = *job
	k.mu.Unlock()
	return k.recorder.Start(ctx, job)
}

// A dispatch routed straight to its worker is claimed by its admission:
// the worker starts it from its event, without a claim, with what a claim
// would have told it.
func TestFreshStartsSkipTheClaim(t *testing.T) {
	t.Parallel()
	ctx := testCtx(t, 30*time.Second)
	n := addNode(t, srv.Client(), redistest.Name(t))
	k := &jobKeeper{recorder: newRecorder(), jobs: map[string]Job{}}
	addWorkers(t, n, k, 1)
	const jobs = 20
	began := time.Now()
	for i := range jobs {
		require.NoError(t, n.DispatchJob(ctx, keyN(i), []byte("payload "+strconv.Itoa(i))))
	}
	// The first start is claimed: the worker has no clock yet.
	assert.GreaterOrEqual(t, n.test.claimsSkipped.Load(), int64(jobs-2), "starts without a claim")
	k.mu.Lock()
	defer k.mu.Unlock()
	for i := range jobs {
		job := k.jobs[keyN(i)]
		assert.Equal(t, "payload "+strconv.Itoa(i), string(job.Payload), keyN(i))
		assert.Equal(t, 1, job.Attempt, keyN(i))
		assert.WithinDuration(t, began, job.CreatedAt, 5*time.Second, keyN(i))
		assert.Equal(t, stateRunning, recordState(ctx, n, keyN(i)), keyN(i))
	}
}

// A worker starts an event claimed by its admission without a claim only
// while the event is fresh, its keep-alive recent and its clock current,
// and never an event older than its last return from the dead.
func TestOnlyFreshEventsSkipTheClaim(t *testing.T) {
	t.Parallel()
	n := addNode(t, srv.Client(), redistest.Name(t))
	w := addWorkers(t, n, newRecorder(), 1)[0]
	ttl, pending := n.cfg.workerTTL.Milliseconds(), n.cfg.pendingJobTTL.Milliseconds()
	const now = int64(1_800_000_000_000)
	id := func(ms int64) string { return fmt.Sprintf("%d-0", ms) }
	set := func(at time.Time, alive int64) {
		w.clock.mu.Lock()
		w.clock.at, w.clock.redisMs, w.clock.aliveMs, w.clock.after = at, now, alive, 0
		w.clock.mu.Unlock()
	}

	set(time.Now(), now-100)
	assert.True(t, w.fresh(id(now-50)), "a fresh event")
	assert.False(t, w.fresh(id(now-pending/4-10)), "an event that waited a quarter of PendingJobTTL")
	assert.False(t, w.fresh("not-an-id"))

	set(time.Now(), now-ttl/2-10)
	assert.False(t, w.fresh(id(now-50)), "a keep-alive half a WorkerTTL old")
	set(time.Now(), 0)
	assert.False(t, w.fresh(id(now-50)), "a worker its last call found unregistered")
	set(time.Now().Add(-n.cfg.workerTTL/2-10*time.Millisecond), now-100)
	assert.False(t, w.fresh(id(now-50)), "a clock half a WorkerTTL old")

	set(time.Now(), now-100)
	w.forgetClock()
	assert.False(t, w.fresh(id(now+50)), "no clock since the worker came back")
	_, err := w.clockedReplies([]any{int64(now + 100), int64(now + 90)}, nil, 0, "test")
	require.NoError(t, err)
	assert.False(t, w.fresh(id(now+50)), "an event added before the worker's return")
	assert.True(t, w.fresh(id(now+150)), "an event added after it")
}
