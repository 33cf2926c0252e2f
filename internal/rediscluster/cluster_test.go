package rediscluster_test

import (
	"context"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"

	"github.com/shepherd-go/shepherd/internal/rediscluster"
	"github.com/shepherd-go/shepherd/internal/redistest"
	"github.com/shepherd-go/shepherd/internal/slotmove"
)

func TestMain(m *testing.M) {
	// After a failed dial (a killed node) go-redis probes the node from a
	// goroutine that ends up to a second after its client closed.
	goleak.VerifyTestMain(m, goleak.IgnoreAnyFunction("github.com/redis/go-redis/v9/internal/pool.(*ConnPool).tryDial"))
}

func ctxT(t *testing.T, d time.Duration) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), d)
	t.Cleanup(cancel)
	return ctx
}

// keyOn returns a key named PREFIX-i whose slot node n serves.
func keyOn(t *testing.T, ctx context.Context, c *redistest.Cluster, prefix string, n int) string {
	t.Helper()
	for i := range 10000 {
		key := fmt.Sprintf("%s-%d", prefix, i)
		m, err := c.NodeOf(ctx, key)
		require.NoError(t, err)
		if m == n {
			return key
		}
	}
	t.Fatalf("no key on node %d", n)
	return ""
}

// A cluster of 3 masters with a replica each: 6 nodes, whose roles the
// cluster tells. A master is killed after a write that reached its
// replica (WAIT): its replica is promoted and serves the write; the old
// master, restarted empty, comes back as the new master's replica and
// copies the data.
func TestFailoverPromotesTheReplicaWithTheReplicatedData(t *testing.T) {
	t.Parallel()
	ctx := ctxT(t, 90*time.Second)
	c := redistest.StartCluster(t, 3, rediscluster.WithReplicas(1))
	require.Equal(t, 3, c.Masters())
	require.Equal(t, 6, c.Nodes())
	require.Equal(t, 1, c.Replicas())
	require.Len(t, c.Addrs(), 6)
	require.Len(t, c.Pids(), 6)
	assert.NotContains(t, c.Pids(), 0)

	masters, err := c.MasterNodes(ctx)
	require.NoError(t, err)
	require.Len(t, masters, 3)
	replicaOf := map[int]int{}
	for _, m := range masters {
		rs, err := c.ReplicasOf(ctx, m)
		require.NoError(t, err)
		require.Len(t, rs, 1, "master %d", m)
		replicaOf[m] = rs[0]
	}
	t.Logf("masters %v, their replicas %v", masters, replicaOf)
	all := append(slices.Clone(masters), replicaOf[masters[0]], replicaOf[masters[1]], replicaOf[masters[2]])
	slices.Sort(all)
	assert.Equal(t, []int{0, 1, 2, 3, 4, 5}, all, "every node is a master or a replica of one")

	m := masters[1]
	r := replicaOf[m]
	key := keyOn(t, ctx, c, redistest.Name(t), m)
	require.NoError(t, c.Client().Set(ctx, key, "v1", 0).Err())
	acked, err := c.Node(m).Do(ctx, "WAIT", 1, 2000).Int()
	require.NoError(t, err)
	require.Equal(t, 1, acked, "the replica did not acknowledge the write")

	short, cancel := context.WithTimeout(ctx, 300*time.Millisecond)
	defer cancel()
	assert.Error(t, c.WaitFailover(short, m), "a master that runs was taken over")

	require.NoError(t, c.Kill(m))
	began := time.Now()
	require.NoError(t, c.WaitFailover(ctx, m))
	t.Logf("failover in %v", time.Since(began))
	n, err := c.NodeOf(ctx, key)
	require.NoError(t, err)
	assert.Equal(t, r, n, "the key's slot is served by the promoted replica")
	now, err := c.MasterNodes(ctx)
	require.NoError(t, err)
	assert.Contains(t, now, r)
	assert.NotContains(t, now, m)
	v, err := c.Node(r).Get(ctx, key).Result()
	require.NoError(t, err)
	assert.Equal(t, "v1", v, "the promoted replica lost the write")
	v, err = c.NewClient(0).Get(ctx, key).Result()
	require.NoError(t, err, "a new cluster client does not find the promoted replica")
	assert.Equal(t, "v1", v)
	require.NoError(t, c.Node(r).Set(ctx, key, "v2", 0).Err(), "the promoted replica refuses writes")

	// The old master comes back with nothing (no AOF) and is made the
	// new master's replica.
	require.NoError(t, c.Restart(ctx, m))
	rs, err := c.ReplicasOf(ctx, r)
	require.NoError(t, err)
	assert.Equal(t, []int{m}, rs)
	conn := c.Node(m).Conn()
	defer conn.Close()
	require.NoError(t, conn.ReadOnly(ctx).Err())
	v, err = conn.Get(ctx, key).Result()
	require.NoError(t, err)
	assert.Equal(t, "v2", v, "the old master did not copy the new one's data")
}

// Without WithReplicas the nodes are the masters, 0 to Masters()-1, as
// before replicas existed; a negative count is refused before anything
// starts.
func TestMastersOnlyByDefault(t *testing.T) {
	t.Parallel()
	ctx := ctxT(t, 60*time.Second)
	_, err := rediscluster.Start(ctx, 3, rediscluster.WithReplicas(-1))
	require.Error(t, err)
	assert.Contains(t, err.Error(), "negative")

	c := redistest.StartCluster(t, 3)
	assert.Equal(t, 3, c.Masters())
	assert.Equal(t, 3, c.Nodes())
	assert.Zero(t, c.Replicas())
	masters, err := c.MasterNodes(ctx)
	require.NoError(t, err)
	assert.Equal(t, []int{0, 1, 2}, masters)
	for _, m := range masters {
		rs, err := c.ReplicasOf(ctx, m)
		require.NoError(t, err)
		assert.Empty(t, rs)
	}
	for i := range 3 {
		cfg, err := c.Node(i).ConfigGet(ctx, "repl-diskless-sync-delay").Result()
		require.NoError(t, err)
		assert.Equal(t, "5", cfg["repl-diskless-sync-delay"], "node %d: the command line changed without replicas", i)
	}
}

// A master added to the cluster serves a slot once MoveSlot gives it one:
// the slot's keys move with it, readers that knew the old master follow
// the MOVED replies, and a slot moved to the master that has it stays.
func TestMoveSlotToAnAddedMaster(t *testing.T) {
	t.Parallel()
	c := redistest.StartCluster(t, 3)
	ctx := ctxT(t, 60*time.Second)
	rdb := c.Client()
	const tag = "{moved}"
	for i := range 250 {
		require.NoError(t, rdb.Set(ctx, fmt.Sprintf("%s:%d", tag, i), i, 0).Err())
	}
	slot, err := rdb.ClusterKeySlot(ctx, tag+":0").Result()
	require.NoError(t, err)
	from, err := c.NodeOf(ctx, tag+":0")
	require.NoError(t, err)

	added, err := c.AddMaster(ctx)
	require.NoError(t, err)
	assert.Equal(t, 3, added)
	ms, err := c.MasterNodes(ctx)
	require.NoError(t, err)
	assert.Equal(t, []int{0, 1, 2}, ms, "an added master serves no slot yet")

	require.NoError(t, c.MoveSlot(ctx, int(slot), from, 10, 0), "a move to its own master")
	require.NoError(t, c.MoveSlot(ctx, int(slot), added, 7, time.Millisecond))
	n, err := c.NodeOf(ctx, tag+":0")
	require.NoError(t, err)
	assert.Equal(t, added, n)
	keys, err := c.Node(from).ClusterCountKeysInSlot(ctx, int(slot)).Result()
	require.NoError(t, err)
	assert.Zero(t, keys, "keys left on the old master")
	keys, err = c.Node(added).ClusterCountKeysInSlot(ctx, int(slot)).Result()
	require.NoError(t, err)
	assert.EqualValues(t, 250, keys)
	for i := range 250 {
		v, err := rdb.Get(ctx, fmt.Sprintf("%s:%d", tag, i)).Int()
		require.NoError(t, err)
		assert.Equal(t, i, v)
	}
	ms, err = c.MasterNodes(ctx)
	require.NoError(t, err)
	assert.Equal(t, []int{0, 1, 2, 3}, ms)

	assert.Error(t, c.MoveSlot(ctx, rediscluster.Slots, 0, 10, 0))
	assert.ErrorIs(t, c.MoveSlot(ctx, 0, 1, 0, 0), slotmove.ErrBadMove, "no key a MIGRATE")
	assert.Error(t, c.MoveSlot(ctx, 0, 9, 10, 0))
}

// A master whose last slot moves away may turn into a replica of the
// slot's new owner before the move tells it so (Redis's
// cluster-allow-replica-migration, on by default): the move is done all
// the same.
func TestMoveTheLastSlotOfAMasterAway(t *testing.T) {
	t.Parallel()
	c := redistest.StartCluster(t, 3, rediscluster.WithArgs("--cluster-allow-replica-migration", "yes"))
	ctx := ctxT(t, 120*time.Second)
	rdb := c.Client()
	const tag = "{last}"
	require.NoError(t, rdb.Set(ctx, tag+":k", "v", 0).Err())
	slot, err := rdb.ClusterKeySlot(ctx, tag+":k").Result()
	require.NoError(t, err)
	home, err := c.NodeOf(ctx, tag+":k")
	require.NoError(t, err)
	for range 4 {
		added, err := c.AddMaster(ctx)
		require.NoError(t, err)
		require.NoError(t, c.MoveSlot(ctx, int(slot), added, 10, 0))
		require.NoError(t, c.MoveSlot(ctx, int(slot), home, 10, 0), "the slot back from node %d, its only one", added)
		n, err := c.NodeOf(ctx, tag+":k")
		require.NoError(t, err)
		assert.Equal(t, home, n)
		assert.Equal(t, "v", rdb.Get(ctx, tag+":k").Val())
	}
}
