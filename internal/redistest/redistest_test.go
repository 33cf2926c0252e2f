package redistest

import (
	"context"
	"net"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

var shared *Server

func TestMain(m *testing.M) { Main(m, &shared) }

func ctxT(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	t.Cleanup(cancel)
	return ctx
}

func TestSharedServerServesParallelTests(t *testing.T) {
	t.Parallel()
	ctx := ctxT(t)
	key := Name(t)
	require.NoError(t, shared.Client().Set(ctx, key, "v", 0).Err())
	assert.Equal(t, "v", shared.Client().Get(ctx, key).Val())
	assert.True(t, strings.HasPrefix(shared.Addr(), "127.0.0.1:"), "addr %q", shared.Addr())
}

func TestNameIsUniqueAndClean(t *testing.T) {
	t.Parallel()
	a, b := Name(t), Name(t)
	assert.NotEqual(t, a, b)
	assert.NotContains(t, a, "/")
	assert.True(t, strings.HasPrefix(a, "TestNameIsUniqueAndClean-"), a)
}

func TestNoPersistenceByDefault(t *testing.T) {
	t.Parallel()
	ctx := ctxT(t)
	s := Start(t)
	cfg := s.Client().ConfigGet(ctx, "appendonly").Val()
	assert.Equal(t, "no", cfg["appendonly"])
	assert.Equal(t, "", s.Client().ConfigGet(ctx, "save").Val()["save"])

	require.NoError(t, s.Client().Set(ctx, "k", "v", 0).Err())
	require.NoError(t, s.Kill())
	require.NoError(t, s.Restart())
	n, err := s.Client().DBSize(ctx).Result()
	require.NoError(t, err)
	assert.Zero(t, n, "a server without persistence must come back empty")
}

func TestKillAndRestartWithAOFKeepsData(t *testing.T) {
	t.Parallel()
	ctx := ctxT(t)
	s := Start(t, WithAOF())
	addr := s.Addr()
	for i := 0; i < 100; i++ {
		require.NoError(t, s.Client().RPush(ctx, "list", i).Err())
	}
	require.NoError(t, s.Kill())

	err := s.Client().Ping(ctx).Err()
	require.Error(t, err, "a killed server must not answer")

	require.NoError(t, s.Restart())
	assert.Equal(t, addr, s.Addr(), "restart keeps the port")
	n, err := s.Client().LLen(ctx, "list").Result()
	require.NoError(t, err)
	assert.EqualValues(t, 100, n, "every write acknowledged before SIGKILL survives with appendfsync always")
}

func TestStopAndRestart(t *testing.T) {
	t.Parallel()
	ctx := ctxT(t)
	s := Start(t, WithAOF())
	require.NoError(t, s.Client().Set(ctx, "k", "v", 0).Err())
	require.NoError(t, s.Stop())
	require.NoError(t, s.Stop(), "stop is idempotent")
	require.Error(t, s.Client().Ping(ctx).Err())
	require.NoError(t, s.Restart())
	assert.Equal(t, "v", s.Client().Get(ctx, "k").Val())
	// Restart of a running server stops it first and keeps the data.
	require.NoError(t, s.Restart())
	assert.Equal(t, "v", s.Client().Get(ctx, "k").Val())
}

func TestTwoServersAtOnce(t *testing.T) {
	t.Parallel()
	ctx := ctxT(t)
	a, b := Start(t), Start(t)
	require.NotEqual(t, a.Addr(), b.Addr())
	require.NoError(t, a.Client().Set(ctx, "who", "a", 0).Err())
	require.NoError(t, b.Client().Set(ctx, "who", "b", 0).Err())
	assert.Equal(t, "a", a.Client().Get(ctx, "who").Val())
	assert.Equal(t, "b", b.Client().Get(ctx, "who").Val())
	// Killing one leaves the other alone.
	require.NoError(t, a.Kill())
	assert.Equal(t, "b", b.Client().Get(ctx, "who").Val())
}

func TestPassword(t *testing.T) {
	t.Parallel()
	ctx := ctxT(t)
	s := Start(t, WithPassword("s3cret"))
	require.NoError(t, s.Client().Ping(ctx).Err(), "the server's own client authenticates")
	anon := redis.NewClient(&redis.Options{Addr: s.Addr()})
	defer anon.Close()
	err := anon.Ping(ctx).Err()
	require.Error(t, err)
	assert.Contains(t, err.Error(), "NOAUTH")
}

func TestPauseFreezesServer(t *testing.T) {
	t.Parallel()
	s := Start(t)
	// Without ContextTimeoutEnabled go-redis would wait its 3s read
	// timeout instead of the ctx deadline below.
	c := redis.NewClient(&redis.Options{Addr: s.Addr(), ContextTimeoutEnabled: true})
	defer c.Close()
	require.NoError(t, c.Ping(ctxT(t)).Err())

	done := make(chan error, 1)
	go func() { done <- s.Pause(500 * time.Millisecond) }()

	// While frozen, a command cannot complete within a short deadline...
	require.Eventually(t, func() bool {
		ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
		defer cancel()
		return c.Ping(ctx).Err() != nil
	}, 2*time.Second, 10*time.Millisecond, "PING kept answering during Pause")
	require.NoError(t, <-done)
	// ...and afterwards the server answers again.
	require.NoError(t, c.Ping(ctxT(t)).Err())
}

func TestFailsWithHelpfulMessageWhenNothingWorks(t *testing.T) {
	t.Parallel()
	_, err := New(WithBinary("redis-server-that-does-not-exist"), withoutContainer())
	require.Error(t, err)
	assert.Contains(t, err.Error(), "apt-get install redis-server")
	assert.Contains(t, err.Error(), "Docker")
}

func TestCloseIsIdempotentAndStopsServer(t *testing.T) {
	t.Parallel()
	s, err := New()
	require.NoError(t, err)
	c := redis.NewClient(&redis.Options{Addr: s.Addr(), MaxRetries: -1})
	defer c.Close()
	require.NoError(t, c.Ping(ctxT(t)).Err())
	require.NoError(t, s.Close())
	require.NoError(t, s.Close())
	require.Error(t, c.Ping(ctxT(t)).Err(), "closed server still answers")
	require.Error(t, s.Restart())
}

func TestWithArgsReachesTheServer(t *testing.T) {
	t.Parallel()
	s := Start(t, WithArgs("--maxmemory", "12mb"))
	cfg, err := s.Client().ConfigGet(ctxT(t), "maxmemory").Result()
	require.NoError(t, err)
	assert.Equal(t, "12582912", cfg["maxmemory"])
}

// A TLS server speaks TLS only: its clients (which trust its fresh CA)
// get answers, a plain client does not.
func TestTLSOnly(t *testing.T) {
	t.Parallel()
	s := Start(t, WithTLS())
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	require.NotNil(t, s.TLSConfig())
	require.NoError(t, s.Client().Set(ctx, "k", "v", 0).Err())
	v, err := s.NewClient().Get(ctx, "k").Result()
	require.NoError(t, err)
	assert.Equal(t, "v", v)
	plain := redis.NewClient(&redis.Options{Addr: s.Addr(), MaxRetries: -1, DialTimeout: time.Second, ReadTimeout: time.Second})
	defer plain.Close()
	assert.Error(t, plain.Ping(ctx).Err(), "the server answered a plain connection")
	// A restart keeps TLS and the port.
	require.NoError(t, s.Kill())
	require.NoError(t, s.Restart())
	require.NoError(t, s.Client().Ping(ctx).Err())
	assert.Nil(t, Start(t).TLSConfig(), "a plain server has no TLS configuration")
}

// A killed server's port taken by another Redis meanwhile (another test's,
// on a busy machine) makes Restart fail, rather than report ready with
// the other server answering at its address: tests would then write to
// and read from a server that is not theirs.
func TestRestartRefusesAPortTakenByAnotherServer(t *testing.T) {
	t.Parallel()
	s := Start(t)
	port := s.Addr()[strings.LastIndex(s.Addr(), ":")+1:]
	require.NoError(t, s.Kill())
	other := exec.Command("redis-server", "--port", port, "--bind", "127.0.0.1", "--save", "", "--appendonly", "no")
	require.NoError(t, other.Start())
	t.Cleanup(func() { _ = other.Process.Kill(); _ = other.Wait() })
	require.Eventually(t, func() bool {
		c, err := net.Dial("tcp", s.Addr())
		if err == nil {
			_ = c.Close()
		}
		return err == nil
	}, 5*time.Second, 10*time.Millisecond, "the other server did not start")

	err := s.Restart()
	require.Error(t, err)
	assert.Contains(t, err.Error(), "not this server")
}
