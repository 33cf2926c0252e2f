package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/shepherd-go/shepherd/internal/redistest"
	"github.com/shepherd-go/shepherd/queue"
)

// The queue commands show and act on every shard of a sharded queue:
// stats add up, the dead letters of every shard are listed, replayed and
// purged, and a task of any shard is cancelled by id.
func TestQueueCommandsOnAShardedQueue(t *testing.T) {
	t.Parallel()
	name, ctx, q := openQueue(t, queue.WithShards(3))
	_, err := q.Serve(func(_ context.Context, t *queue.Task) ([]byte, error) {
		return nil, queue.Permanent(errors.New("bad"))
	}, queue.WithWorkers(1))
	require.NoError(t, err)
	var dead, delayed []string
	shards := map[string]bool{}
	for i := range 3 {
		f, err := q.Submit(ctx, []byte("x"))
		require.NoError(t, err)
		_, err = f.Wait(ctx)
		require.ErrorIs(t, err, queue.ErrFailed)
		dead = append(dead, f.ID())
		g, err := q.Submit(ctx, []byte("later"), queue.WithTaskID(fmt.Sprint("later-", i)), queue.WithDelay(time.Hour))
		require.NoError(t, err)
		delayed = append(delayed, g.ID())
		shards[f.ID()[:2]] = true
	}
	require.Len(t, shards, 3, "the dead letters are in three shards: %v", dead)

	code, out, errOut := runCmd("queue", "stats", "-queue", name, "-redis", srv.Addr())
	require.Equal(t, exitOK, code, errOut)
	assert.Contains(t, out, "0 available, 3 delayed, 0 retrying, 0 in flight, 3 dead")
	assert.Contains(t, out, "in 1 processes")

	code, out, errOut = runCmd("queue", "dead", "-queue", name, "-redis", srv.Addr(), "-json")
	require.Equal(t, exitOK, code, errOut)
	var rows []taskRow
	require.NoError(t, json.Unmarshal([]byte(out), &rows))
	require.Len(t, rows, 3)
	assert.Equal(t, []string{dead[2], dead[1], dead[0]}, []string{rows[0].ID, rows[1].ID, rows[2].ID}, "newest first")

	code, out, errOut = runCmd(append([]string{"queue", "cancel", "-queue", name, "-redis", srv.Addr()}, delayed...)...)
	require.Equal(t, exitOK, code, errOut)
	for _, id := range delayed {
		assert.Contains(t, out, id+": cancelled")
	}
	code, out, errOut = runCmd(append([]string{"queue", "replay", "-queue", name, "-redis", srv.Addr()}, dead...)...)
	require.Equal(t, exitOK, code, errOut)
	for _, id := range dead {
		assert.Contains(t, out, id+": replayed")
	}
	require.Eventually(t, func() bool {
		st, err := q.Stats(ctx)
		return err == nil && st.Dead == 3 && st.Available == 0 && st.InFlight == 0 && st.Delayed == 0
	}, 5*time.Second, 10*time.Millisecond, "the replayed tasks did not fail again")
	code, out, errOut = runCmd("queue", "purge-dead", "-queue", name, "-redis", srv.Addr(), "-yes")
	require.Equal(t, exitOK, code, errOut)
	assert.Contains(t, out, "deleted 3 dead letters")
}

// The CLI given one node of a Redis Cluster reads and manages a sharded
// queue spread over its masters, and reshards it once it is idle.
func TestQueueCommandsOnARedisCluster(t *testing.T) {
	t.Parallel()
	c := redistest.StartCluster(t, 3)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	name := redistest.Name(t)
	q, err := queue.Open(ctx, c.NewClient(0), name, queue.WithShards(3))
	require.NoError(t, err)
	for i := range 6 {
		_, err := q.Submit(ctx, []byte("x"), queue.WithDelay(time.Hour), queue.WithTaskID(fmt.Sprint("t", i)))
		require.NoError(t, err)
	}
	addr := c.Addrs()[1] // any node
	code, out, errOut := runCmd("queue", "stats", "-queue", name, "-redis", addr, "-json")
	require.Equal(t, exitOK, code, errOut)
	var st struct {
		Delayed  int `json:"delayed"`
		Shards   int `json:"shards"`
		PerShard []struct {
			Shard   int    `json:"shard"`
			Tag     string `json:"tag"`
			Slot    int    `json:"slot"`
			Master  string `json:"master"`
			Delayed int    `json:"delayed"`
		} `json:"per_shard"`
	}
	require.NoError(t, json.Unmarshal([]byte(out), &st))
	assert.Equal(t, 6, st.Delayed, out)
	assert.Equal(t, 3, st.Shards, out)
	require.Len(t, st.PerShard, 3, out)
	sum := 0
	for i, s := range st.PerShard {
		assert.Equal(t, i, s.Shard)
		assert.Equal(t, name+map[bool]string{true: "", false: fmt.Sprint("#", i)}[i == 0], s.Tag)
		m, err := c.NodeOf(ctx, "shepherd:{"+s.Tag+"}:queue:settings")
		require.NoError(t, err)
		assert.Equal(t, c.Addrs()[m], s.Master, "shard %d's master", i)
		slot, err := c.Node(0).ClusterKeySlot(ctx, "{"+s.Tag+"}").Result()
		require.NoError(t, err)
		assert.EqualValues(t, slot, s.Slot, "shard %d's slot", i)
		sum += s.Delayed
	}
	assert.Equal(t, 6, sum, "the shards' parts add up")
	code, out, errOut = runCmd("queue", "stats", "-queue", name, "-redis", addr)
	require.Equal(t, exitOK, code, errOut)
	assert.Contains(t, out, "queue "+name+" (3 shards): 0 available, 6 delayed")
	assert.Regexp(t, `(?m)^SHARD +TAG +SLOT +MASTER +AVAILABLE`, out)
	assert.Regexp(t, `(?m)^1 +`+regexp.QuoteMeta(name+"#1")+` +\d+ +127\.0\.0\.1:\d+ +0 `, out)

	code, _, errOut = runCmd("queue", "reshard", "-queue", name, "-redis", addr, "2")
	assert.Equal(t, exitError, code, "a live process and unfinished tasks")
	assert.Contains(t, errOut, "is live")
	for i := range 6 {
		require.NoError(t, q.Cancel(ctx, fmt.Sprint("t", i)))
	}
	require.NoError(t, q.Close(ctx))
	code, out, errOut = runCmd("queue", "reshard", "-queue", name, "-redis", addr, "2", "-json")
	require.Equal(t, exitOK, code, errOut)
	assert.JSONEq(t, fmt.Sprintf(`{"queue": %q, "shards": 2}`, name), out)
	q, err = queue.Open(ctx, c.NewClient(0), name)
	require.NoError(t, err)
	defer q.Close(context.Background())
	f, err := q.Submit(ctx, []byte("y"))
	require.NoError(t, err)
	assert.Regexp(t, `^[01]~`, f.ID(), "two shards now")
}

// move-shard moves a shard of a queue to a master added to the cluster,
// with its tasks; the queue then reads and cancels them there. Asked
// again, it finds the shard moved; bad shards, masters and servers are
// refused with what is wrong.
func TestQueueMoveShardCommand(t *testing.T) {
	t.Parallel()
	c, ctx, name, q := queueOnCluster(t, 3)
	var ofShard1 []string
	for range 60 {
		f, err := q.Submit(ctx, []byte("x"), queue.WithDelay(time.Hour))
		require.NoError(t, err)
		if f.ID()[:2] == "1~" {
			ofShard1 = append(ofShard1, f.ID())
		}
	}
	require.NotEmpty(t, ofShard1)
	added, err := c.AddMaster(ctx)
	require.NoError(t, err)
	st, err := q.Stats(ctx)
	require.NoError(t, err)
	from, to, any := st.PerShard[1].Master, c.Addrs()[added], c.Addrs()[0]

	code, out, errOut := runCmd("queue", "move-shard", "-queue", name, "-redis", any, "1", to, "-yes", "-json", "-batch", "2")
	require.Equal(t, exitOK, code, errOut)
	moved := checkMoved(t, out, movedShard{Queue: name, Shard: 1, Slot: st.PerShard[1].Slot, From: from, To: to})
	// Its settings, delayed set, count and tasks' records at least, in
	// batches of 2.
	assert.GreaterOrEqual(t, moved, 4, "the shard's keys moved")
	n, err := c.NodeOf(ctx, "shepherd:{"+name+"#1}:queue:settings")
	require.NoError(t, err)
	assert.Equal(t, added, n)
	require.Eventually(t, func() bool {
		st, err := q.Stats(ctx)
		return err == nil && st.PerShard[1].Master == to && st.Delayed == 60
	}, 10*time.Second, 50*time.Millisecond)
	require.NoError(t, q.Cancel(ctx, ofShard1[0]), "a script on the shard's new master")
	info, err := q.Inspect(ctx, ofShard1[0])
	require.NoError(t, err)
	assert.Equal(t, queue.StateCancelled, info.State)

	code, out, errOut = runCmd("queue", "move-shard", "-queue", name, "-redis", any, "1", to)
	require.Equal(t, exitOK, code, errOut)
	assert.Contains(t, out, "is on "+to+" already")

	alone, err := queue.Open(ctx, srv.Client(), name) // the same name on a standalone server
	require.NoError(t, err)
	defer alone.Close(context.Background())
	checkRefused(t, []string{"queue", "move-shard", "-queue", name}, []refusal{
		{[]string{"-redis", any, "3", to, "-yes"}, exitUsage, "has 3 shards"},
		{[]string{"-redis", any, "1", "127.0.0.1:1", "-yes"}, exitUsage, "is not a master of the cluster; its masters are"},
		{[]string{"-redis", any, "x", to}, exitUsage, "want 0 to"},
		{[]string{"-redis", any, "1", "nowhere"}, exitUsage, "want HOST:PORT"},
		{[]string{"-redis", any, "0", to, "-json"}, exitUsage, "not confirmed"},
		{[]string{"-redis", any, "0", to, "-yes", "-batch", "0"}, exitUsage, "-batch"},
		{[]string{"-redis", srv.Addr(), "0", to, "-yes"}, exitUsage, "not one"},
	})
	n, err = c.NodeOf(ctx, "shepherd:{"+name+"}:queue:settings")
	require.NoError(t, err)
	assert.NotEqual(t, added, n, "a refused move moved shard 0")
}

// A move left half-done (the slot MIGRATING on its master, IMPORTING on
// the new one, some keys moved) is finished by move-shard run again; the
// queue's tasks of that shard, refused meanwhile, then run.
func TestQueueMoveShardFinishesAMoveLeftHalfDone(t *testing.T) {
	t.Parallel()
	c, ctx, name, q := queueOnCluster(t, 2)
	var ofShard1 []*queue.Future
	for range 20 {
		f, err := q.Submit(ctx, []byte("x"))
		require.NoError(t, err)
		if f.ID()[:2] == "1~" {
			ofShard1 = append(ofShard1, f)
		}
	}
	require.NotEmpty(t, ofShard1)
	st, err := q.Stats(ctx)
	require.NoError(t, err)
	slot := st.PerShard[1].Slot
	from, err := c.NodeOf(ctx, "shepherd:{"+name+"#1}:queue:settings")
	require.NoError(t, err)
	to := (from + 1) % 3
	myID := func(i int) string { return c.Node(i).Do(ctx, "CLUSTER", "MYID").Val().(string) }
	require.NoError(t, c.Node(to).Do(ctx, "CLUSTER", "SETSLOT", slot, "IMPORTING", myID(from)).Err())
	require.NoError(t, c.Node(from).Do(ctx, "CLUSTER", "SETSLOT", slot, "MIGRATING", myID(to)).Err())
	keys, err := c.Node(from).ClusterGetKeysInSlot(ctx, slot, 3).Result()
	require.NoError(t, err)
	host, port, _ := strings.Cut(c.Addrs()[to], ":")
	args := []any{"MIGRATE", host, port, "", 0, 5000, "KEYS"}
	for _, k := range keys {
		args = append(args, k)
	}
	require.NoError(t, c.Node(from).Do(ctx, args...).Err())
	short, cancelShort := context.WithTimeout(ctx, 300*time.Millisecond)
	defer cancelShort()
	err = q.Cancel(short, ofShard1[0].ID())
	require.Error(t, err, "a script of the half-moved shard ran")
	assert.True(t, errors.Is(err, context.DeadlineExceeded) || strings.Contains(err.Error(), "TRYAGAIN"), "%v", err)

	code, out, errOut := runCmd("queue", "move-shard", "-queue", name, "-redis", c.Addrs()[0], "1", c.Addrs()[to], "-yes")
	require.Equal(t, exitOK, code, errOut)
	assert.Contains(t, out, "moved shard 1 of queue "+name)
	_, err = q.Serve(func(_ context.Context, t *queue.Task) ([]byte, error) { return t.Payload, nil }, queue.WithWorkers(2))
	require.NoError(t, err)
	for _, f := range ofShard1 {
		res, err := f.Wait(ctx)
		require.NoError(t, err, "task %s", f.ID())
		assert.Equal(t, "x", string(res))
	}
}

// queueOnCluster opens a queue of shards shards on a new 3-master
// cluster, for a test of a minute at most.
func queueOnCluster(t *testing.T, shards int) (*redistest.Cluster, context.Context, string, *queue.Queue) {
	t.Helper()
	c := redistest.StartCluster(t, 3)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	t.Cleanup(cancel)
	name := redistest.Name(t)
	q, err := queue.Open(ctx, c.NewClient(0), name, queue.WithShards(shards))
	require.NoError(t, err)
	t.Cleanup(func() { _ = q.Close(context.Background()) })
	return c, ctx, name, q
}
