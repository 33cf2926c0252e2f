package shepherdtest

import (
	"testing"

	"github.com/redis/go-redis/v9"

	"github.com/shepherd-go/shepherd/internal/redistest"
)

// RedisOption configures the Redis server that Redis and RedisAddr start.
type RedisOption func(*redisConfig)

type redisConfig struct{ opts []redistest.Option }

// WithPassword makes the server require password (requirepass); the
// client Redis returns uses it. Defaults to no password.
func WithPassword(password string) RedisOption {
	return func(c *redisConfig) { c.opts = append(c.opts, redistest.WithPassword(password)) }
}

// WithRedisArgs appends raw redis-server arguments, for example
// WithRedisArgs("--maxmemory", "10mb"). Defaults to none: no persistence,
// listening on a free port of 127.0.0.1.
func WithRedisArgs(args ...string) RedisOption {
	return func(c *redisConfig) { c.opts = append(c.opts, redistest.WithArgs(args...)) }
}

// Redis starts a private Redis server for tb and returns a client of it.
// The server is stopped and its data deleted when tb's test ends (after
// the cleanups registered later, such as OpenQueue's and StartPool's);
// the client is closed then too. Each call starts a server of its own
// (some 30 ms with redis-server), so parallel tests never share keys.
//
// It runs the redis-server found on PATH (or named by the
// REDISTEST_SERVER environment variable), with no persistence, on a free
// port of 127.0.0.1. Without one it runs the redis:7 image in Docker
// through testcontainers-go, removed at cleanup. When neither works it
// fails tb (it never skips) with a message that says what to install:
// the redis-server package (Debian/Ubuntu: apt-get install
// redis-server; macOS: brew install redis), or a Docker engine.
func Redis(tb testing.TB, opts ...RedisOption) *redis.Client {
	tb.Helper()
	return start(tb, opts).NewClient()
}

// RedisAddr is Redis for code that dials Redis itself: it starts a
// private server the same way and returns its host:port.
func RedisAddr(tb testing.TB, opts ...RedisOption) string {
	tb.Helper()
	return start(tb, opts).Addr()
}

func start(tb testing.TB, opts []RedisOption) *redistest.Server {
	tb.Helper()
	var cfg redisConfig
	for _, o := range opts {
		o(&cfg)
	}
	s, err := redistest.New(cfg.opts...)
	if err != nil {
		tb.Fatalf("shepherdtest: no Redis for the test: %v", err)
	}
	tb.Cleanup(func() {
		if err := s.Close(); err != nil {
			tb.Errorf("shepherdtest: stop Redis: %v", err)
		}
	})
	return s
}
