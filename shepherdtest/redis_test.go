package shepherdtest_test

import (
	"context"
	"net"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/shepherd-go/shepherd/shepherdtest"
)

// Each call gets a server of its own, gone when the test ends.
func TestRedisIsPrivateAndGoneAfterTheTest(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	var addr string
	t.Run("inner", func(t *testing.T) {
		a, b := shepherdtest.Redis(t), shepherdtest.Redis(t)
		require.NoError(t, a.Set(ctx, "k", "a", 0).Err())
		n, err := b.Exists(ctx, "k").Result()
		require.NoError(t, err)
		assert.Zero(t, n, "two calls share a server")
		addr = a.Options().Addr
		require.NotEqual(t, addr, b.Options().Addr)
		assert.NotEmpty(t, shepherdtest.RedisAddr(t))
	})
	require.NotEmpty(t, addr)
	_, err := net.DialTimeout("tcp", addr, time.Second)
	assert.Error(t, err, "the server still listens after its test ended")
}

func TestRedisWithPasswordAndArgs(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	rdb := shepherdtest.Redis(t, shepherdtest.WithPassword("s3cret"), shepherdtest.WithRedisArgs("--maxmemory", "10mb"))
	require.NoError(t, rdb.Ping(ctx).Err())
	assert.Equal(t, "10485760", rdb.ConfigGet(ctx, "maxmemory").Val()["maxmemory"])
	anon := redis.NewClient(&redis.Options{Addr: rdb.Options().Addr})
	defer anon.Close()
	assert.ErrorContains(t, anon.Ping(ctx).Err(), "NOAUTH")
}

// With no redis-server on PATH and no Docker engine, the test fails
// with what to install. DOCKER_HOST names a socket that does not exist,
// so that the test means the same on a machine that runs Docker. (Not
// parallel: it empties PATH.)
func TestRedisWithNeitherSaysWhatToInstall(t *testing.T) {
	t.Setenv("PATH", "")
	t.Setenv("REDISTEST_SERVER", "")
	t.Setenv("DOCKER_HOST", "unix:///nonexistent/docker.sock")
	msg := fatalOf(t, func(tb testing.TB) { shepherdtest.Redis(tb) })
	t.Log(msg)
	assert.Contains(t, msg, "shepherdtest: no Redis for the test")
	assert.Contains(t, msg, `no "redis-server" binary on PATH`)
	assert.Contains(t, msg, "apt-get install redis-server")
	assert.Contains(t, msg, "Docker")
}
