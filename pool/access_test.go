package pool

import (
	"fmt"
	"log/slog"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/redis/go-redis/v9/maintnotifications"
	"github.com/shepherd-go/shepherd/internal/redistest"
	"github.com/shepherd-go/shepherd/internal/testlog"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// exercise runs every call of the pool API through rdb: two full nodes
// with workers, a client-only node, dispatch, notify, stop, the
// introspection calls, a worker leaving, Close and Shutdown.
func exercise(t *testing.T, rdb redis.UniversalClient, name string, opts ...NodeOption) {
	t.Helper()
	ctx := testCtx(t, 60*time.Second)
	a, err := AddNode(ctx, rdb, name, fastOpts(opts...)...)
	require.NoError(t, err)
	b, err := AddNode(ctx, rdb, name, fastOpts(opts...)...)
	require.NoError(t, err)
	rec := newRecorder()
	wa := addWorkers(t, a, rec, 2)
	addWorkers(t, b, rec, 2)
	c, err := AddNode(ctx, rdb, name, append(opts, WithClientOnly())...)
	require.NoError(t, err)
	for i := range 20 {
		require.NoError(t, c.DispatchJob(ctx, keyN(i), []byte("p")))
	}
	require.NoError(t, c.NotifyWorker(ctx, keyN(0), []byte("hi")))
	require.NoError(t, c.StopJob(ctx, keyN(1)))
	// A schedule's plan and a ticker's tick, through the same client.
	sp := &producer{name: "acl"}
	sp.set(&JobPlan{Jobs: jobsOf("p", "planned")}, ErrEndSchedule)
	require.NoError(t, c.Schedule(ctx, sp, 50*time.Millisecond))
	tk, err := c.NewTicker(ctx, "acl", 20*time.Millisecond)
	require.NoError(t, err)
	select {
	case <-tk.C:
	case <-time.After(10 * time.Second):
		t.Fatal("no tick")
	}
	require.NoError(t, c.StopTicker(ctx, "acl"))
	// A history sample, as the janitor takes one every HistoryStep.
	a.sampleHistory(ctx)
	hist, err := History(ctx, rdb, name, 10)
	require.NoError(t, err)
	assert.NotEmpty(t, hist, "the janitor's history sample was refused")
	require.Eventually(t, func() bool { return rec.runningKeys()["planned"] == 1 }, 10*time.Second, 10*time.Millisecond)
	require.NoError(t, c.StopJob(ctx, "planned"))
	live, err := c.LiveWorkers(ctx)
	require.NoError(t, err)
	assert.Equal(t, 4, live)
	st, err := Inspect(ctx, rdb, name)
	require.NoError(t, err)
	assert.Equal(t, 19, st.Running)
	ok, err := Exists(ctx, rdb, name)
	require.NoError(t, err)
	assert.True(t, ok)
	_, err = c.Stats(ctx)
	require.NoError(t, err)
	require.NoError(t, a.RemoveWorker(ctx, wa[0]))
	require.Eventually(t, func() bool { return len(rec.runningKeys()) == 19 }, 10*time.Second, 10*time.Millisecond)
	began := time.Now()
	require.NoError(t, a.Close(ctx))
	assert.Less(t, time.Since(began), 5*time.Second, "Close took long")
	require.Eventually(t, func() bool {
		st, err := c.Stats(ctx)
		return err == nil && st.Running == 19 && len(st.Orphans) == 0
	}, 10*time.Second, 20*time.Millisecond, "jobs did not settle after a node left")
	require.NoError(t, c.Shutdown(ctx))
	select {
	case <-b.Done():
	case <-time.After(10 * time.Second):
		t.Fatal("a node did not close with the pool")
	}
	assert.Empty(t, rec.runningKeys(), "jobs run after Shutdown")
}

// aclUser creates user on s with the pool's documented ACL, minus drop.
func aclUser(t *testing.T, s *redistest.Server, user, pool string, drop ...string) *redis.Client {
	t.Helper()
	return aclUserOf(t, s, user, []string{"~shepherd:{" + pool + "}:*", "&shepherd:{" + pool + "}:*"}, drop...)
}

// aclUserOf creates user on s with ACLCommands (minus drop) on the keys
// and channels of patterns.
func aclUserOf(t *testing.T, s *redistest.Server, user string, patterns []string, drop ...string) *redis.Client {
	t.Helper()
	args := []any{"ACL", "SETUSER", user, "on", ">pw", "resetkeys", "resetchannels"}
	for _, p := range patterns {
		args = append(args, p)
	}
	args = append(args, "-@all")
	for _, c := range strings.Fields(ACLCommands) {
		if !contains(drop, c) {
			args = append(args, c)
		}
	}
	require.NoError(t, s.Client().Do(testCtx(t, 10*time.Second), args...).Err())
	rdb := redis.NewClient(&redis.Options{Addr: s.Addr(), Username: user, Password: "pw", ContextTimeoutEnabled: true, PoolSize: 64,
		MaintNotificationsConfig: &maintnotifications.Config{Mode: maintnotifications.ModeDisabled}})
	t.Cleanup(func() { _ = rdb.Close() })
	return rdb
}

func contains(list []string, s string) bool {
	for _, v := range list {
		if v == s {
			return true
		}
	}
	return false
}

// aclLog returns what the server's ACL log recorded (denied commands and
// keys), empty when nothing was denied.
func aclLog(t *testing.T, s *redistest.Server) []any {
	t.Helper()
	res, err := s.Client().Do(testCtx(t, 10*time.Second), "ACL", "LOG").Result()
	require.NoError(t, err)
	log, _ := res.([]any)
	return log
}

// A user confined to one pool's keys and channels, with exactly
// ACLCommands, runs every call of the pool; Redis denies nothing.
func TestPoolAsACLUser(t *testing.T) {
	t.Parallel()
	s := redistest.Start(t)
	name := redistest.Name(t)
	exercise(t, aclUser(t, s, "shepherd", name), name)
	assert.Empty(t, aclLog(t, s), "Redis denied the pool's user something")
}

// A pool of several shards needs the same commands, on the keys and
// channels of every shard ({POOL} and {POOL#*}), as docs/redis.md gives
// them.
func TestShardedPoolAsACLUser(t *testing.T) {
	t.Parallel()
	s := redistest.Start(t)
	name := redistest.Name(t)
	rdb := aclUserOf(t, s, "shepherd", []string{
		"~shepherd:{" + name + "}:*", "&shepherd:{" + name + "}:*",
		"~shepherd:{" + name + "#*}:*", "&shepherd:{" + name + "#*}:*"})
	exercise(t, rdb, name, WithShards(3))
	assert.Empty(t, aclLog(t, s), "Redis denied the pool's user something")
}

// Without CLIENT UNBLOCK the pool works all the same (its blocking reads
// are shorter) and says so once per client.
func TestPoolWithoutClientUnblock(t *testing.T) {
	t.Parallel()
	s := redistest.Start(t)
	name := redistest.Name(t)
	rdb := aclUser(t, s, "limited", name, "+client|unblock")
	var logs testlog.Buffer
	exercise(t, rdb, name, WithLogger(slog.New(slog.NewTextHandler(&logs, &slog.HandlerOptions{Level: slog.LevelWarn}))))
	assert.Equal(t, 1, strings.Count(logs.String(), "may not run CLIENT ID or CLIENT UNBLOCK"), logs.String())
	for _, entry := range aclLog(t, s) {
		assert.Contains(t, fmt.Sprint(entry), "client|unblock", "only CLIENT UNBLOCK may be denied")
	}
}

// A pool works on a Redis that speaks TLS only (a certificate made at
// test time, no plain port).
func TestPoolOverTLS(t *testing.T) {
	t.Parallel()
	s := redistest.Start(t, redistest.WithTLS())
	rdb := redis.NewClient(&redis.Options{Addr: s.Addr(), TLSConfig: s.TLSConfig(), ContextTimeoutEnabled: true,
		MaintNotificationsConfig: &maintnotifications.Config{Mode: maintnotifications.ModeDisabled}})
	t.Cleanup(func() { _ = rdb.Close() })
	exercise(t, rdb, redistest.Name(t))
}

// docs/redis.md gives the pool's ACL line with exactly these commands.
func TestRedisDocGivesThePoolACL(t *testing.T) {
	t.Parallel()
	doc, err := os.ReadFile("../docs/redis.md")
	require.NoError(t, err)
	assert.Contains(t, strings.Join(strings.Fields(string(doc)), " "), "-@all "+ACLCommands)
}
