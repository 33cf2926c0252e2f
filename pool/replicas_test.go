package pool

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/shepherd-go/shepherd/internal/redistest"
)

func TestWithReplicasRefusesBadValues(t *testing.T) {
	t.Parallel()
	ctx := testCtx(t, 10*time.Second)
	for _, opts := range [][]NodeOption{
		{WithReplicas(-1, time.Second)},
		{WithReplicas(1, 0)},
		{WithReplicas(1, 10*time.Second)}, // not shorter than the call timeout (10s)
		{WithCallTimeout(time.Second), WithReplicas(1, 2*time.Second)},
	} {
		_, err := AddNode(ctx, srv.Client(), redistest.Name(t), opts...)
		assert.ErrorIs(t, err, ErrInvalidOption)
	}
}

// replicatedNode starts a private primary with one replica, and a node of
// a new pool on the primary with WithReplicas(1, timeout) and one worker.
func replicatedNode(t *testing.T, timeout time.Duration) (n *Node, r *recorder, primary, repl *redistest.Server) {
	t.Helper()
	primary = redistest.Start(t)
	repl = redistest.StartReplicaOf(t, primary)
	t.Cleanup(func() { _ = repl.Thaw() })
	n = addNode(t, primary.Client(), redistest.Name(t), WithReplicas(1, timeout))
	r = newRecorder()
	addWorkers(t, n, r, 1)
	return n, r, primary, repl
}

// hasRecord tells whether rdb holds a record of key in n's pool.
func hasRecord(t *testing.T, rdb redis.UniversalClient, n *Node, key string) bool {
	t.Helper()
	_, err := rdb.HGet(context.Background(), n.lay.jobs, key).Result()
	if errors.Is(err, redis.Nil) {
		return false
	}
	require.NoError(t, err)
	return true
}

func TestDispatchAndStopReturnOnceReplicated(t *testing.T) {
	t.Parallel()
	ctx := testCtx(t, 30*time.Second)
	n, r, _, repl := replicatedNode(t, time.Second)
	require.NoError(t, n.DispatchJob(ctx, "k", []byte("p")))
	assert.True(t, hasRecord(t, repl.Client(), n, "k"), "a dispatch that returned nil is on the replica")
	assert.Equal(t, 1, r.runningKeys()["k"])
	require.NoError(t, n.StopJob(ctx, "k"))
	assert.False(t, hasRecord(t, repl.Client(), n, "k"), "a stop that returned nil is on the replica")
}

func TestADispatchNotReplicatedFailsAndIsWithdrawn(t *testing.T) {
	t.Parallel()
	ctx := testCtx(t, 30*time.Second)
	n, r, primary, repl := replicatedNode(t, time.Second) // not less: the dispatch after the thaw must not time out on a loaded machine
	require.NoError(t, repl.Freeze())
	err := n.DispatchJob(ctx, "k", []byte("p"))
	require.ErrorIs(t, err, ErrNotReplicated)
	assert.ErrorContains(t, err, "0 of 1 replicas acknowledged the writes within 1s")
	// It failed: the job is withdrawn, on the master too, and stops.
	require.Eventually(t, func() bool {
		return !hasRecord(t, primary.Client(), n, "k") && r.runningKeys()["k"] == 0
	}, 10*time.Second, 10*time.Millisecond, "the job was not withdrawn")
	require.NoError(t, repl.Thaw())
	require.NoError(t, n.DispatchJob(ctx, "k", []byte("p")))
}

func TestAStopNotReplicatedFails(t *testing.T) {
	t.Parallel()
	ctx := testCtx(t, 30*time.Second)
	n, _, _, repl := replicatedNode(t, time.Second) // the first dispatch's WAIT must not time out on a loaded machine
	require.NoError(t, n.DispatchJob(ctx, "k", []byte("p")))
	require.NoError(t, repl.Freeze())
	err := n.StopJob(ctx, "k")
	require.ErrorIs(t, err, ErrNotReplicated)
	require.NoError(t, repl.Thaw())
	require.ErrorIs(t, n.StopJob(ctx, "k"), ErrJobNotFound, "the stop happened on the master")
}
