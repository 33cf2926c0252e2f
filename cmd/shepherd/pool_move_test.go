package main

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/shepherd-go/shepherd/internal/keys"
	"github.com/shepherd-go/shepherd/internal/redistest"
	"github.com/shepherd-go/shepherd/pool"
)

// starts is a JobHandler that counts each key's starts and stops.
type starts struct {
	mu              sync.Mutex
	started, stoppd map[string]int
}

func (s *starts) Start(_ context.Context, job *pool.Job) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.started[job.Key]++
	return nil
}

func (s *starts) Stop(_ context.Context, key string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.stoppd[key]++
	return nil
}

func (s *starts) counts(key string) (started, stopped int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.started[key], s.stoppd[key]
}

// pool move-shard moves a shard of a running pool (3 shards, a node with
// workers, running jobs) to a master added to the cluster, with its
// jobs' records: they keep running where they ran, none started again,
// and the shard's calls (a new dispatch, a stop) work on the new master.
// Asked again, it finds the shard moved; bad shards, masters, servers and
// pools are refused with what is wrong.
func TestPoolMoveShardCommand(t *testing.T) {
	t.Parallel()
	c := redistest.StartCluster(t, 3)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	name := redistest.Name(t)
	node, err := pool.AddNode(ctx, c.NewClient(64), name, pool.WithShards(3), pool.WithWorkerTTL(5*time.Second))
	require.NoError(t, err)
	t.Cleanup(func() { _ = node.Close(context.Background()) })
	h := &starts{started: map[string]int{}, stoppd: map[string]int{}}
	for range 2 {
		_, err := node.AddWorker(ctx, h)
		require.NoError(t, err)
	}
	// Shard i's records: shepherd:{TAG}:pool:jobs (pool/layout.go).
	jobsOf := func(shard int) string {
		return "shepherd:{" + keys.ShardTag(name, shard) + "}:pool:jobs"
	}
	inShard := func(key string, shard int) bool {
		ok, err := c.Client().HExists(ctx, jobsOf(shard), key).Result()
		require.NoError(t, err)
		return ok
	}
	var all, ofShard1 []string
	for i := range 30 {
		key := fmt.Sprint("device-", i)
		require.NoError(t, node.DispatchJob(ctx, key, []byte("p")))
		all = append(all, key)
		if inShard(key, 1) {
			ofShard1 = append(ofShard1, key)
		}
	}
	require.NotEmpty(t, ofShard1)
	added, err := c.AddMaster(ctx)
	require.NoError(t, err)
	fromNode, err := c.NodeOf(ctx, jobsOf(1))
	require.NoError(t, err)
	slot, err := c.Node(0).ClusterKeySlot(ctx, jobsOf(1)).Result()
	require.NoError(t, err)
	from, to, via := c.Addrs()[fromNode], c.Addrs()[added], c.Addrs()[0]

	began := time.Now()
	code, out, errOut := runCmd("pool", "move-shard", "-pool", name, "-redis", via, "1", to, "-yes", "-json", "-batch", "2")
	require.Equal(t, exitOK, code, errOut)
	t.Logf("moved in %v", time.Since(began))
	// The slot of shard 1's keys, as the cluster computes it.
	moved := checkMoved(t, out, movedShard{Pool: name, Shard: 1, Slot: int(slot), From: from, To: to})
	// Its settings, records, streams and maps at least, in batches of 2.
	assert.GreaterOrEqual(t, moved, 5, "the shard's keys moved")
	n, err := c.NodeOf(ctx, jobsOf(1))
	require.NoError(t, err)
	assert.Equal(t, added, n)
	held, err := c.Node(added).HLen(ctx, jobsOf(1)).Result()
	require.NoError(t, err)
	assert.EqualValues(t, len(ofShard1), held, "the new master holds the shard's records")

	// Every job runs as before, started once: none lost, none restarted.
	for _, key := range all {
		info, err := pool.InspectJob(ctx, c.Client(), name, key)
		require.NoError(t, err, key)
		assert.Equal(t, pool.JobRunning, info.State, key)
		assert.True(t, info.WorkerHealthy, key)
		started, stopped := h.counts(key)
		assert.Equal(t, [2]int{1, 0}, [2]int{started, stopped}, "%s: starts and stops", key)
	}
	st, err := pool.Inspect(ctx, c.Client(), name)
	require.NoError(t, err)
	assert.Equal(t, len(all), st.Running)
	assert.Empty(t, st.Orphans)

	// The shard's calls, on its new master: a new key's dispatch, a stop.
	fresh := ""
	for i := 0; fresh == "" && i < 40; i++ {
		key := fmt.Sprint("new-", i)
		require.NoError(t, node.DispatchJob(ctx, key, nil), key)
		if inShard(key, 1) {
			fresh = key
		}
	}
	require.NotEmpty(t, fresh, "no new key fell in shard 1")
	started, _ := h.counts(fresh)
	assert.Equal(t, 1, started)
	ok, err := c.Node(added).HExists(ctx, jobsOf(1), fresh).Result()
	require.NoError(t, err)
	assert.True(t, ok, "the new job's record is on the new master")
	require.NoError(t, node.StopJob(ctx, ofShard1[0]))
	_, stopped := h.counts(ofShard1[0])
	assert.Equal(t, 1, stopped)
	_, err = pool.InspectJob(ctx, c.Client(), name, ofShard1[0])
	assert.ErrorIs(t, err, pool.ErrJobNotFound)

	code, out, errOut = runCmd("pool", "move-shard", "-pool", name, "-redis", via, "1", to)
	require.Equal(t, exitOK, code, errOut)
	assert.Contains(t, out, "shard 1 of pool "+name+" (slot "+fmt.Sprint(slot)+") is on "+to+" already")

	// The same name on a standalone server.
	alone, err := pool.AddNode(ctx, srv.Client(), name, pool.WithClientOnly())
	require.NoError(t, err)
	defer alone.Close(context.Background())
	masters := slices.Sorted(slices.Values(c.Addrs())) // the three and the added one
	checkRefused(t, []string{"pool", "move-shard"}, []refusal{
		{[]string{"-pool", name, "-redis", via, "3", to, "-yes"}, exitUsage, "pool " + name + " has 3 shards: shard 3 does not exist"},
		{[]string{"-pool", name, "-redis", via, "1", "127.0.0.1:1", "-yes"}, exitUsage, "is not a master of the cluster; its masters are " + strings.Join(masters, ", ")},
		{[]string{"-pool", name, "-redis", via, "x", to}, exitUsage, "want 0 to 255"},
		{[]string{"-pool", name, "-redis", via, "1"}, exitUsage, "want a shard and the address"},
		{[]string{"-pool", name, "-redis", via, "1", "nowhere"}, exitUsage, "want HOST:PORT"},
		{[]string{"-pool", name, "-redis", via, "0", to, "-json"}, exitUsage, "not confirmed"},
		{[]string{"-pool", name, "-redis", via, "0", to, "-yes", "-batch", "0"}, exitUsage, "-batch"},
		{[]string{"-pool", name, "-redis", srv.Addr(), "0", to, "-yes"}, exitUsage, "not one"},
		{[]string{"-redis", via, "0", to, "-yes"}, exitUsage, "-pool is required"},
		{[]string{"-pool", name + "-nope", "-redis", via, "0", to, "-yes"}, exitError, "not found"},
	})
	n, err = c.NodeOf(ctx, jobsOf(0))
	require.NoError(t, err)
	assert.NotEqual(t, added, n, "a refused move moved shard 0")
}
