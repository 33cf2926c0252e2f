package redistest

import (
	"context"
	"errors"
	"fmt"
	"os"
	"syscall"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// sentinelCtx bounds a sentinel test: two failovers and a former master's
// conversion into a replica (about 10 s) fit in it with room under -race.
func sentinelCtx(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	t.Cleanup(cancel)
	return ctx
}

// withSentinelBinary names the redis-server executable of a group.
func withSentinelBinary(path string) SentinelOption {
	return func(c *sentinelConfig) { c.binary = path }
}

// writesReach polls: it writes key through c until the write is read back
// from s itself, within 10 s, and returns the value that got there.
func writesReach(t *testing.T, ctx context.Context, c *redis.Client, s *Server, key string) string {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	var last string
	for i := 0; time.Now().Before(deadline); i++ {
		v := fmt.Sprint(i)
		err := c.Set(ctx, key, v, 0).Err()
		got, gerr := s.Client().Get(ctx, key).Result()
		if err == nil && gerr == nil && got == v {
			return v
		}
		last = fmt.Sprintf("set: %v; get from %s: %q, %v", err, s.Addr(), got, gerr)
		select {
		case <-ctx.Done():
			t.Fatalf("ctx ended: %s", last)
		case <-time.After(20 * time.Millisecond):
		}
	}
	t.Fatalf("writes through the failover client never reached %s in 10s: %s", s.Addr(), last)
	return ""
}

// replicates asserts that r is a replica of master, link up, holding
// key=want.
func replicates(t *testing.T, ctx context.Context, r, master *Server, key, want string) {
	t.Helper()
	info, err := replicationInfo(ctx, r)
	require.NoError(t, err)
	assert.Equal(t, "slave", info["role"], "%s", r.Addr())
	assert.Equal(t, portOf(master), info["master_port"], "%s replicates the master", r.Addr())
	assert.Equal(t, "up", info["master_link_status"], "%s", r.Addr())
	got, err := r.Client().Get(ctx, key).Result()
	require.NoError(t, err, "%s", r.Addr())
	assert.Equal(t, want, got, "%s has the master's data", r.Addr())
}

// A planned failover moves the master to the replica and the failover
// client's writes with it. (That Sentinel then turns the former master
// into a replica takes 10 s; the Kill test below waits for it.)
func TestSentinelsPlannedFailoverMovesWrites(t *testing.T) {
	t.Parallel()
	ctx := sentinelCtx(t)
	g := StartSentinels(t)
	servers := g.Servers()
	require.Len(t, servers, 2)
	require.Len(t, g.SentinelAddrs(), 3)
	p, err := g.Primary(ctx)
	require.NoError(t, err)
	require.Same(t, servers[0], p, "the first server starts as primary")
	reps, err := g.Replicas(ctx)
	require.NoError(t, err)
	require.Equal(t, []*Server{servers[1]}, reps)

	c := g.NewFailoverClient()
	key := Name(t)
	require.NoError(t, c.Set(ctx, key, "before", 0).Err())
	require.NoError(t, g.WaitReplicasSynced(ctx))
	replicates(t, ctx, servers[1], servers[0], key, "before")

	start := time.Now()
	m, err := g.Failover(ctx)
	require.NoError(t, err)
	t.Logf("failover: %v", time.Since(start))
	require.Same(t, servers[1], m, "the only replica is promoted")
	p, err = g.Primary(ctx)
	require.NoError(t, err)
	assert.Same(t, m, p)
	writesReach(t, ctx, c, m, key)
}

// A killed primary is replaced by a replica the sentinels elect, the
// other replica follows the new master, and the killed primary, rejoined
// (empty: no persistence), is a synced replica of the master, whichever
// it is by then (on a loaded machine Sentinel may fail over again); a
// planned failover then works at once.
func TestSentinelsKillElectsReplicaAndRestartRejoins(t *testing.T) {
	t.Parallel()
	ctx := sentinelCtx(t)
	g := StartSentinels(t, WithSentinelReplicas(2))
	c := g.NewFailoverClient()
	key := Name(t)
	require.NoError(t, c.Set(ctx, key, "before", 0).Err())

	old, err := g.Primary(ctx)
	require.NoError(t, err)
	require.NoError(t, old.Kill())
	start := time.Now()
	m, err := g.WaitMaster(ctx, old)
	require.NoError(t, err)
	t.Logf("failover after kill: %v", time.Since(start))
	require.NotSame(t, old, m)
	assert.Contains(t, g.Servers()[1:], m, "a replica is elected")
	v := writesReach(t, ctx, c, m, key)
	require.NoError(t, g.WaitReplicasSynced(ctx), "the other replica follows the new master")
	reps, err := g.Replicas(ctx)
	require.NoError(t, err)
	require.Len(t, reps, 2)
	require.Contains(t, reps, old)
	for _, r := range reps {
		if r != old {
			replicates(t, ctx, r, m, key, v)
		}
	}

	require.NoError(t, g.Rejoin(ctx, old))
	start = time.Now()
	require.NoError(t, g.WaitReplicasSynced(ctx))
	t.Logf("restarted primary a synced replica: %v", time.Since(start))
	m, err = g.Primary(ctx)
	require.NoError(t, err)
	replicates(t, ctx, old, m, key, v)

	// A planned failover right after: any replica may be promoted.
	start = time.Now()
	next, err := g.Failover(ctx)
	require.NoError(t, err)
	t.Logf("planned failover after the rejoin: %v", time.Since(start))
	require.NotSame(t, m, next)
	writesReach(t, ctx, c, next, key)
}

// The options reach the nodes and sentinels; Close kills every process
// and removes every directory, and is idempotent.
func TestSentinelsOptionsAndCloseLeavesNothing(t *testing.T) {
	t.Parallel()
	ctx := sentinelCtx(t)
	g, err := NewSentinels(WithSentinelReplicas(2), WithDownAfter(1500*time.Millisecond), WithDataArgs("--maxmemory", "12mb"))
	require.NoError(t, err)
	for _, s := range g.Servers() {
		cfg, err := s.Client().ConfigGet(ctx, "*").Result()
		require.NoError(t, err)
		assert.Equal(t, "12582912", cfg["maxmemory"], "%s", s.Addr())
		assert.Equal(t, "no", cfg["appendonly"])
		assert.Equal(t, "", cfg["save"])
		assert.Equal(t, "yes", cfg["repl-diskless-sync"])
	}
	sc := redis.NewSentinelClient(&redis.Options{Addr: g.SentinelAddrs()[0]})
	defer sc.Close()
	master, err := sc.Master(ctx, g.MasterName()).Result()
	require.NoError(t, err)
	assert.Equal(t, "1500", master["down-after-milliseconds"])
	assert.Equal(t, "3000", master["failover-timeout"])
	assert.Equal(t, "2", master["quorum"])
	assert.Equal(t, "2", master["num-slaves"])
	assert.Equal(t, "2", master["num-other-sentinels"])

	var pids []int
	var dirs []string
	for _, p := range g.sentinels {
		pids, dirs = append(pids, p.cmd.Process.Pid), append(dirs, p.dir)
	}
	for _, s := range g.Servers() {
		p := s.be.(*process)
		pids, dirs = append(pids, p.cmd.Process.Pid), append(dirs, p.dir)
	}
	require.Len(t, pids, 6)
	c := g.NewFailoverClient()
	require.NoError(t, c.Ping(ctx).Err())

	require.NoError(t, g.Close())
	require.NoError(t, g.Close())
	for i, pid := range pids {
		// Waited for: the pid is gone, not a zombie.
		assert.ErrorIs(t, syscall.Kill(pid, 0), syscall.ESRCH, "process %d (pid %d) still exists", i, pid)
		_, err := os.Stat(dirs[i])
		assert.True(t, errors.Is(err, os.ErrNotExist), "directory %s is still there", dirs[i])
	}
	assert.ErrorIs(t, c.Ping(ctx).Err(), redis.ErrClosed, "Close closes the failover clients")
}

func TestSentinelsFailWithHelpfulMessage(t *testing.T) {
	t.Parallel()
	_, err := NewSentinels(withSentinelBinary("redis-server-that-does-not-exist"))
	require.Error(t, err)
	assert.Contains(t, err.Error(), "apt-get install redis-server")
	_, err = NewSentinels(WithSentinelReplicas(-1))
	assert.Error(t, err)
}

// Rejoin brings a killed primary back as a replica of the new master at
// once, with its data, never as an empty master that a second failover
// could promote (Restart alone leaves it one for about 10 s).
func TestSentinelsRejoinComesBackAsAReplica(t *testing.T) {
	t.Parallel()
	ctx := sentinelCtx(t)
	g := StartSentinels(t, WithSentinelReplicas(1))
	c := g.NewFailoverClient()
	key := Name(t)
	require.NoError(t, c.Set(ctx, key, "before", 0).Err())
	old, now, err := g.Fault(ctx, FaultKill)
	require.NoError(t, err)
	v := writesReach(t, ctx, c, now, key)

	require.NoError(t, g.Rejoin(ctx, old))
	role, err := old.Client().Do(ctx, "ROLE").Slice()
	require.NoError(t, err)
	require.NotEmpty(t, role)
	assert.Equal(t, "slave", role[0], "Rejoin brought it back as %v", role)
	require.NoError(t, g.WaitReplicasSynced(ctx))
	replicates(t, ctx, old, now, key, v)
	require.Error(t, g.Rejoin(ctx, now), "the master itself cannot rejoin")
}
