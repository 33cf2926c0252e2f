package pool

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/redis/go-redis/v9/maintnotifications"
	"github.com/shepherd-go/shepherd/internal/redistest"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// Tests of liveness: what a dead, paused or cut-off process held is taken
// from it as soon as it is declared dead, never after a fixed grace.

// timedClient returns a client of s that honours ctx deadlines on socket
// reads, as users are told to build theirs, closed with the test.
func timedClient(t *testing.T, s *redistest.Server) *redis.Client {
	rdb := redis.NewClient(&redis.Options{Addr: s.Addr(), ContextTimeoutEnabled: true,
		MaintNotificationsConfig: &maintnotifications.Config{Mode: maintnotifications.ModeDisabled}})
	t.Cleanup(func() { _ = rdb.Close() })
	return rdb
}

// A router that read a job event and then stopped (paused, cut off,
// crashed) holds it in its pending list. The event must reach a worker as
// soon as that router's node is known to be dead, not after the routers'
// ack grace (PendingJobTTL, 20s by default): found by checks outside the
// suite (docs/ARCHITECTURE.md, failure modes: 16), where a frozen
// process's blocked read took the requeued jobs of its own dead workers
// and held them ~24s.
func TestDeadRoutersEventsAreTakenOverAtOnce(t *testing.T) {
	t.Parallel()
	ctx := testCtx(t, 60*time.Second)
	name := redistest.Name(t)
	rdb := srv.Client()
	client := addNode(t, rdb, name, WithClientOnly(), WithPendingJobTTL(DefaultPendingJobTTL))
	// No router exists yet: the job waits in the job stream.
	done := make(chan error, 1)
	go func() { done <- client.DispatchJob(ctx, "held", []byte("p")) }()
	require.Eventually(t, func() bool {
		n, err := rdb.XLen(ctx, client.lay.jobStream).Result()
		return err == nil && n == 1
	}, 10*time.Second, 10*time.Millisecond)
	// A router of a node that then died reads it: it sits in that
	// consumer's pending list.
	require.NoError(t, rdb.XGroupCreate(ctx, client.lay.jobStream, routerGroup, "0").Err())
	res, err := rdb.XReadGroup(ctx, &redis.XReadGroupArgs{Group: routerGroup, Consumer: "0123456789abcdef",
		Streams: []string{client.lay.jobStream, ">"}, Count: 10, Block: -1}).Result()
	require.NoError(t, err)
	require.Len(t, res[0].Messages, 1)

	// A live full node with a worker joins; its janitor takes the event
	// over.
	joined := time.Now()
	n := addNode(t, rdb, name, WithPendingJobTTL(DefaultPendingJobTTL))
	rec := newRecorder()
	addWorkers(t, n, rec, 1)
	select {
	case err := <-done:
		require.NoError(t, err)
	case <-time.After(3 * time.Second):
		t.Fatalf("the dead router's event was not taken over within 3s (the ack grace is %v)", DefaultPendingJobTTL)
	}
	t.Logf("the job held by a dead router started %v after a live node joined", time.Since(joined))
	assert.Equal(t, 1, rec.runningKeys()["held"])
	cs, err := rdb.XInfoConsumers(ctx, client.lay.jobStream, routerGroup).Result()
	require.NoError(t, err)
	for _, c := range cs {
		assert.NotEqual(t, "0123456789abcdef", c.Name, "the dead router's consumer was not removed")
	}
}

// A node whose keep-alive lapsed is removed with what it owns (its record,
// its stream and the answers waiting in it), and shows as dead until then.
func TestDeadNodeIsRemoved(t *testing.T) {
	t.Parallel()
	ctx := testCtx(t, 30*time.Second)
	name := redistest.Name(t)
	rdb := srv.Client()
	janitor := addNode(t, rdb, name)
	dead := addNode(t, rdb, name, WithClientOnly())
	stream := dead.nodeStream.Key()
	dead.crash()
	crashed := time.Now()
	require.Eventually(t, func() bool {
		exists, err := rdb.Exists(ctx, stream).Result()
		require.NoError(t, err)
		rec, err := rdb.HExists(ctx, janitor.lay.nodes, dead.ID()).Result()
		require.NoError(t, err)
		alive, err := rdb.HExists(ctx, janitor.lay.alive, "n:"+dead.ID()).Result()
		require.NoError(t, err)
		return exists == 0 && !rec && !alive
	}, 10*time.Second, 20*time.Millisecond, "the dead node's record, keep-alive or stream outlived it")
	t.Logf("dead node removed %v after its last keep-alive could have been", time.Since(crashed))
	st, err := janitor.Stats(ctx)
	require.NoError(t, err)
	require.Len(t, st.Nodes, 1)
	assert.Equal(t, janitor.ID(), st.Nodes[0].ID)
	assert.True(t, st.Nodes[0].Healthy)
}

// gatedStart is a recorder whose Start waits for its gate.
type gatedStart struct {
	*recorder
	entered chan struct{} // closed when Start is entered
	gate    chan struct{} // Start returns once it is closed
	once    sync.Once
}

func (g *gatedStart) Start(ctx context.Context, job *Job) error {
	g.once.Do(func() { close(g.entered) })
	<-g.gate
	return g.recorder.Start(ctx, job)
}

// A node that the pool declared dead while one of its DispatchJob calls
// waited lost the answer with its stream; once it runs again it rejoins
// and the call learns its outcome from the job's record.
func TestRevivedNodeSettlesItsWaitingCalls(t *testing.T) {
	t.Parallel()
	ctx := testCtx(t, 30*time.Second)
	name := redistest.Name(t)
	rdb := srv.Client()
	host := addNode(t, rdb, name)
	h := &gatedStart{recorder: newRecorder(), entered: make(chan struct{}), gate: make(chan struct{})}
	addWorkers(t, host, h, 1)
	caller := addNode(t, rdb, name, WithClientOnly())
	done := make(chan error, 1)
	go func() { done <- caller.DispatchJob(ctx, "k", nil) }()
	<-h.entered

	// The caller stops keeping alive; the pool removes it.
	caller.pauseKeepAlive(true)
	require.Eventually(t, func() bool {
		n, err := rdb.Exists(ctx, caller.nodeStream.Key()).Result()
		return err == nil && n == 0
	}, 10*time.Second, 20*time.Millisecond, "the silent node was not removed")
	close(h.gate) // Start succeeds; its answer finds no stream
	require.Eventually(t, func() bool {
		return recordState(ctx, host, "k") == stateRunning
	}, 10*time.Second, 10*time.Millisecond)
	select {
	case err := <-done:
		t.Fatalf("DispatchJob returned %v before its node rejoined", err)
	default:
	}

	caller.pauseKeepAlive(false)
	select {
	case err := <-done:
		require.NoError(t, err, "the job runs: DispatchJob must say so")
	case <-time.After(5 * time.Second):
		t.Fatal("DispatchJob still waits after its node rejoined")
	}
	exists, err := rdb.Exists(ctx, caller.nodeStream.Key()).Result()
	require.NoError(t, err)
	assert.EqualValues(t, 1, exists, "the revived node's stream is back")
	st, err := host.Stats(ctx)
	require.NoError(t, err)
	found := false
	for _, ns := range st.Nodes {
		if ns.ID == caller.ID() {
			found = true
			assert.True(t, ns.Healthy)
			assert.True(t, ns.Client, "the revived node's record is back")
		}
	}
	assert.True(t, found, "the revived node is not listed")
}

// StopJob of a job that has not started yet ends it, and the DispatchJob
// waiting for its start says so instead of waiting for ever.
func TestStopBeforeStartEndsTheDispatch(t *testing.T) {
	t.Parallel()
	ctx := testCtx(t, 30*time.Second)
	n := addNode(t, srv.Client(), redistest.Name(t)) // no worker: the job stays queued
	done := make(chan error, 1)
	go func() { done <- n.DispatchJob(ctx, "early", nil) }()
	require.Eventually(t, func() bool {
		keys, err := n.JobKeys(ctx)
		return err == nil && len(keys) == 1
	}, 10*time.Second, 10*time.Millisecond)
	require.NoError(t, n.StopJob(ctx, "early"))
	select {
	case err := <-done:
		require.ErrorIs(t, err, ErrJobStopped)
		t.Logf("DispatchJob: %v", err)
	case <-time.After(5 * time.Second):
		t.Fatal("DispatchJob still waits for a job StopJob ended")
	}
}

// The same when the job was routed to a worker that had not claimed it
// yet: the worker drops the start and handles the stop.
func TestStopBeforeClaimEndsTheDispatch(t *testing.T) {
	t.Parallel()
	ctx := testCtx(t, 30*time.Second)
	n := addNode(t, srv.Client(), redistest.Name(t))
	// The worker is busy with a first job's Start, so the second job
	// waits, routed to it and unclaimed: its payload is too large to
	// travel in its start event, so its admission routes it rather than
	// hand it over (a handed job starts, then stops:
	// TestAStopOfAHandedJobFollowsItsStart).
	h := &gatedStart{recorder: newRecorder(), entered: make(chan struct{}), gate: make(chan struct{})}
	addWorkers(t, n, h, 1)
	first := make(chan error, 1)
	go func() { first <- n.DispatchJob(ctx, "first", nil) }()
	<-h.entered
	second := make(chan error, 1)
	go func() { second <- n.DispatchJob(ctx, "second", make([]byte, maxInlinePayload+1)) }()
	require.Eventually(t, func() bool {
		return recordState(ctx, n, "second") == stateRouted
	}, 10*time.Second, 10*time.Millisecond)
	stopped := make(chan error, 1)
	go func() { stopped <- n.StopJob(ctx, "second") }()
	require.Eventually(t, func() bool {
		return recordState(ctx, n, "second") == stateStopping
	}, 10*time.Second, 10*time.Millisecond)
	close(h.gate)
	require.NoError(t, <-first)
	require.NoError(t, <-stopped)
	select {
	case err := <-second:
		require.ErrorIs(t, err, ErrJobStopped)
	case <-time.After(5 * time.Second):
		t.Fatal("DispatchJob still waits for a job StopJob ended before its worker claimed it")
	}
	assert.Zero(t, h.runningKeys()["second"])
}

// A node that is stopping (here: told the pool shuts down) and finds the
// pool's keys gone (the Shutdown that stopped it deleted them) must not
// bring them back: it neither registers again nor takes the janitor
// lease. Seen in a chaos soak: a Shutdown left the settings and the lease
// behind, written by a node still stopping.
func TestStoppingNodeDoesNotRecreateThePool(t *testing.T) {
	t.Parallel()
	ctx := testCtx(t, 20*time.Second)
	n := addNode(t, srv.Client(), redistest.Name(t))
	n.mu.Lock()
	n.closed, n.shutDown = true, true // as stop does first
	n.mu.Unlock()
	require.NoError(t, n.deleteKeys(ctx))

	_, err := n.keepAlive(ctx)
	require.NoError(t, err)
	<-time.After(4 * n.cfg.janitorTick()) // janitor passes that must not happen
	left, err := srv.Client().Exists(ctx, n.lay.settings, n.lay.nodes, n.lay.janitor).Result()
	require.NoError(t, err)
	assert.Zero(t, left, "a stopping node brought back the pool's settings, its record or the janitor lease")
}
