package redistest

import (
	"errors"
	"fmt"
	"os"
	"syscall"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/shepherd-go/shepherd/internal/rediscluster"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// keyOnEachNode returns, for each node of c, a key whose slot that node
// serves, all named PREFIX-i.
func keyOnEachNode(t *testing.T, c *Cluster) (prefix string, keys []string) {
	t.Helper()
	ctx := ctxT(t)
	out := make([]string, c.Masters())
	prefix, found := Name(t), 0
	for i := 0; found < len(out); i++ {
		require.Less(t, i, 10000, "no key found for some node: %v", out)
		key := fmt.Sprintf("%s-%d", prefix, i)
		n, err := c.NodeOf(ctx, key)
		require.NoError(t, err)
		if out[n] == "" {
			out[n] = key
			found++
		}
	}
	return prefix, out
}

// A 3-master cluster serves a key on each master, through the cluster
// client and on that master alone; a killed master's slots fail while the
// others serve, and a restarted one serves its slots again.
func TestClusterServesAKeyOnEachMasterAndSurvivesARestart(t *testing.T) {
	t.Parallel()
	ctx := ctxT(t)
	c := StartCluster(t, 3)
	require.Equal(t, 3, c.Masters())
	require.Len(t, c.Addrs(), 3)
	prefix, keys := keyOnEachNode(t, c)
	for i, key := range keys {
		require.NoError(t, c.Client().Set(ctx, key, fmt.Sprint(i), 0).Err())
		v, err := c.Node(i).Get(ctx, key).Result()
		require.NoError(t, err, "node %d", i)
		assert.Equal(t, fmt.Sprint(i), v, "node %d", i)
		info, err := c.Node(i).ClusterInfo(ctx).Result()
		require.NoError(t, err)
		assert.Contains(t, info, "cluster_state:ok")
		assert.Contains(t, info, "cluster_slots_ok:16384")
		assert.Contains(t, info, "cluster_size:3", "node %d: every node is a master with slots", i)
		cfg := c.Node(i).ConfigGet(ctx, "appendonly").Val()
		assert.Equal(t, "no", cfg["appendonly"])
		assert.Equal(t, "", c.Node(i).ConfigGet(ctx, "save").Val()["save"])
		// Other nodes redirect rather than serve it.
		other := c.Node((i+1)%3).Get(ctx, key).Err()
		require.Error(t, other)
		assert.Contains(t, other.Error(), "MOVED")
	}

	assert.ElementsMatch(t, keys, Keys(t, c.Client(), prefix+"-*"), "Keys scans every master")

	require.NoError(t, c.Kill(1))
	assert.Zero(t, c.Pids()[1])
	probe := redis.NewClient(&redis.Options{Addr: c.Addrs()[1], MaxRetries: -1})
	defer probe.Close()
	assert.Error(t, probe.Ping(ctx).Err(), "a killed node answered")
	require.NoError(t, c.Client().Set(ctx, keys[0], "still", 0).Err(), "the other masters serve on")

	require.NoError(t, c.Restart(ctx, 1))
	assert.NotZero(t, c.Pids()[1])
	n, err := c.Node(1).Exists(ctx, keys[1]).Result()
	require.NoError(t, err)
	assert.Zero(t, n, "a node without persistence comes back empty")
	require.Eventually(t, func() bool {
		return c.Client().Set(ctx, keys[1], "again", 0).Err() == nil
	}, 10*time.Second, 20*time.Millisecond, "the cluster client never reached the restarted node")
	assert.Equal(t, "again", c.Node(1).Get(ctx, keys[1]).Val())
}

// Close kills every node and removes every directory; it is idempotent.
func TestClusterCloseLeavesNothing(t *testing.T) {
	t.Parallel()
	c, err := NewCluster(3)
	require.NoError(t, err)
	pids, dirs := c.Pids(), c.Dirs()
	for i := range pids {
		require.NotZero(t, pids[i])
		require.DirExists(t, dirs[i])
	}
	cl := c.NewClient(4)
	require.NoError(t, cl.Ping(ctxT(t)).Err())
	require.NoError(t, c.Close())
	require.NoError(t, c.Close())
	for i, pid := range pids {
		// The process was waited for: its pid is gone, not a zombie.
		assert.ErrorIs(t, syscall.Kill(pid, 0), syscall.ESRCH, "node %d (pid %d) still exists", i, pid)
		_, err := os.Stat(dirs[i])
		assert.True(t, errors.Is(err, os.ErrNotExist), "node %d's directory %s is still there", i, dirs[i])
	}
	assert.Equal(t, []int{0, 0, 0}, c.Pids())
	assert.ErrorIs(t, cl.Ping(ctxT(t)).Err(), redis.ErrClosed, "Close closes the clients it made")
	assert.Error(t, c.Restart(ctxT(t), 0))
}

func TestClusterFailsWithHelpfulMessage(t *testing.T) {
	t.Parallel()
	_, err := NewCluster(3, rediscluster.WithBinaries("redis-server-that-does-not-exist", ""))
	require.ErrorIs(t, err, rediscluster.ErrNotInstalled)
	assert.Contains(t, err.Error(), "apt-get install redis-server")
	_, err = NewCluster(3, rediscluster.WithBinaries("", "redis-cli-that-does-not-exist"))
	require.ErrorIs(t, err, rediscluster.ErrNotInstalled)
	_, err = NewCluster(2)
	require.Error(t, err)
	assert.Contains(t, err.Error(), "at least 3")
}
