package pool

import (
	"testing"
	"time"

	"github.com/shepherd-go/shepherd/internal/redistest"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// addBareNode adds a node with only opts (no test defaults) and closes it
// at the end of the test.
func addBareNode(t *testing.T, pool string, opts ...NodeOption) (*Node, error) {
	t.Helper()
	n, err := AddNode(testCtx(t, 10*time.Second), srv.Client(), pool, opts...)
	if err == nil {
		t.Cleanup(func() { _ = closeNodeWithin(n) })
	}
	return n, err
}

// The pool-wide settings are stored by the first full node; a node that
// sets another value is refused while another full node is live, with an
// error naming the setting and both values, and leaves nothing behind; a
// node that does not set them, and a client-only node, adopts the pool's.
// Once no full node is live, a node may change them.
func TestPoolWideSettingsAreStoredWithThePool(t *testing.T) {
	t.Parallel()
	ctx := testCtx(t, 30*time.Second)
	name := redistest.Name(t)
	first, err := addBareNode(t, name, WithWorkerTTL(time.Second), WithPendingJobTTL(2*time.Second), WithMaxQueuedJobs(50))
	require.NoError(t, err)

	for _, tc := range []struct {
		opt        NodeOption
		name, want string
	}{
		{WithWorkerTTL(2 * time.Second), "WorkerTTL", "this node sets 2s but the pool uses 1s"},
		{WithPendingJobTTL(time.Minute), "PendingJobTTL", "this node sets 1m0s but the pool uses 2s"},
		{WithMaxQueuedJobs(7), "MaxQueuedJobs", "this node sets 7 but the pool uses 50"},
	} {
		_, err := addBareNode(t, name, tc.opt)
		require.ErrorIs(t, err, ErrInvalidOption, tc.name)
		assert.Contains(t, err.Error(), tc.name+": "+tc.want)
	}
	records, err := srv.Client().HKeys(ctx, first.lay.nodes).Result()
	require.NoError(t, err)
	assert.Equal(t, []string{first.ID()}, records, "a refused node left its record")
	alive, err := srv.Client().HKeys(ctx, first.lay.alive).Result()
	require.NoError(t, err)
	assert.Equal(t, []string{"n:" + first.ID()}, alive, "a refused node left its keep-alive")

	same, err := addBareNode(t, name, WithWorkerTTL(time.Second))
	require.NoError(t, err, "the same value is fine")
	adopter, err := addBareNode(t, name)
	require.NoError(t, err)
	assert.Equal(t, poolSettings{time.Second, 2 * time.Second, 50}, adopter.settingsOf(), "a node that sets nothing adopts the pool's settings")
	client, err := addBareNode(t, name, WithClientOnly(), WithWorkerTTL(time.Hour))
	require.NoError(t, err, "a client-only node adopts the pool's settings")
	assert.Equal(t, time.Second, client.settingsOf().workerTTL)

	// Every full node leaves: the pool is dormant, and a new node may
	// change its settings.
	for _, n := range []*Node{first, same, adopter} {
		require.NoError(t, n.Close(ctx))
	}
	changer, err := addBareNode(t, name, WithWorkerTTL(3*time.Second))
	require.NoError(t, err)
	st, err := Inspect(ctx, srv.Client(), name)
	require.NoError(t, err)
	assert.Equal(t, 3*time.Second, st.WorkerTTL)
	assert.Equal(t, 2*time.Second, st.PendingJobTTL, "what the changer did not set stays")
	require.NoError(t, changer.Shutdown(ctx))
}

// A node that sets its WorkerTTL lower than another node's used to judge
// that node's healthy workers by its own TTL whenever it held the janitor
// lease, declaring them dead again and again (docs/ARCHITECTURE.md,
// failure modes: 18).
// Now both use the pool's, and nothing restarts.
func TestNodesAgreeOnTheWorkerTTL(t *testing.T) {
	t.Parallel()
	ctx := testCtx(t, 30*time.Second)
	name := redistest.Name(t)
	janitor, err := addBareNode(t, name, WithWorkerTTL(time.Second))
	require.NoError(t, err)
	require.Eventually(t, func() bool {
		holder, err := srv.Client().Get(ctx, janitor.lay.janitor).Result()
		return err == nil && holder == janitor.ID()
	}, 5*time.Second, 10*time.Millisecond, "the first node never took the janitor lease")
	host, err := addBareNode(t, name) // no TTL of its own
	require.NoError(t, err)
	rec := newRecorder()
	addWorkers(t, host, rec, 3)
	for i := range 10 {
		require.NoError(t, host.DispatchJob(ctx, keyN(i), nil))
	}
	// Several of the host's keep-alive periods under the default TTL.
	<-time.After(4 * time.Second)
	rec.mu.Lock()
	defer rec.mu.Unlock()
	total := 0
	for _, n := range rec.starts {
		total += n
	}
	assert.Equal(t, 10, total, "healthy workers were declared dead and their jobs restarted")
	assert.Empty(t, rec.stops)
}

// Timings below what the keep-alive cadence can meet are refused.
func TestTimingsHaveLowerBounds(t *testing.T) {
	t.Parallel()
	for _, opt := range []NodeOption{WithWorkerTTL(10 * time.Millisecond), WithWorkerTTL(MinWorkerTTL - 1),
		WithPendingJobTTL(100 * time.Millisecond)} {
		_, err := AddNode(testCtx(t, 5*time.Second), srv.Client(), redistest.Name(t), opt)
		require.ErrorIs(t, err, ErrInvalidOption)
		assert.Contains(t, err.Error(), "must be at least")
	}
}
