package pool

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/shepherd-go/shepherd/internal/redistest"
)

// Delete removes a dormant pool (every node closed, a job kept for the
// next worker), refuses while a node is live, and keeps the keys of a
// queue of the same name, as Shutdown does.
func TestDeleteRemovesADormantPool(t *testing.T) {
	t.Parallel()
	ctx := testCtx(t, 30*time.Second)
	name := redistest.Name(t)
	queueKey := "shepherd:{" + name + "}:queue:settings" // a queue of the same name
	require.NoError(t, srv.Client().Set(ctx, queueKey, "kept", 0).Err())
	node := addNode(t, srv.Client(), name)
	addWorkers(t, node, newRecorder(), 2)
	for i := range 3 {
		require.NoError(t, node.DispatchJob(ctx, keyN(i), []byte("p")))
	}

	n, err := Delete(ctx, srv.Client(), name)
	require.ErrorIs(t, err, ErrInUse)
	assert.Zero(t, n)
	ok, err := Exists(ctx, srv.Client(), name)
	require.NoError(t, err)
	assert.True(t, ok, "a refused Delete removed the pool")

	require.NoError(t, node.Close(ctx))
	before := len(redistest.Keys(t, srv.Client(), "*{"+name+"}*")) - 1 // less the queue's
	n, err = Delete(ctx, srv.Client(), name)
	require.NoError(t, err)
	assert.Equal(t, before, n)
	assert.Equal(t, []string{queueKey}, redistest.Keys(t, srv.Client(), "*{"+name+"}*"), "keys left, or the queue's removed")
	n, err = Delete(ctx, srv.Client(), name)
	require.NoError(t, err)
	assert.Zero(t, n)

	// A pool made again starts empty.
	again := addNode(t, srv.Client(), name)
	st, err := again.Stats(ctx)
	require.NoError(t, err)
	assert.Zero(t, st.Jobs)
	require.NoError(t, again.Shutdown(ctx))
	assert.Equal(t, "kept", srv.Client().Get(ctx, queueKey).Val(), "Shutdown removed a same-named queue's key")
}

// DeleteEvenIfLive deletes a pool a node is in.
func TestDeleteEvenIfLive(t *testing.T) {
	t.Parallel()
	ctx := testCtx(t, 30*time.Second)
	name := redistest.Name(t)
	addNode(t, srv.Client(), name, WithClientOnly())
	n, err := Delete(ctx, srv.Client(), name, DeleteEvenIfLive())
	require.NoError(t, err)
	assert.Positive(t, n)
	ok, err := Exists(ctx, srv.Client(), name)
	require.NoError(t, err)
	assert.False(t, ok)
}

// Delete refuses a name that cannot be a pool's.
func TestDeleteBadName(t *testing.T) {
	t.Parallel()
	_, err := Delete(context.Background(), srv.Client(), "a}b")
	require.Error(t, err)
	assert.Contains(t, err.Error(), "pool: delete")
}
