// Package cli holds the flags and setup the example programs share.
package cli

import (
	"context"
	"flag"
	"fmt"
	"log/slog"
	"os"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/shepherd-go/shepherd/internal/redislog"
)

// Config is what both examples take from their flags.
type Config struct {
	Redis string
	Pool  string
}

// Register defines -redis (default localhost:6379, or REDIS_ADDR) and
// -pool on fs.
func (c *Config) Register(fs *flag.FlagSet) {
	def := os.Getenv("REDIS_ADDR")
	if def == "" {
		def = "localhost:6379"
	}
	fs.StringVar(&c.Redis, "redis", def, "Redis address host:port or redis:// URL (env REDIS_ADDR)")
	fs.StringVar(&c.Pool, "pool", "demo", "pool name")
}

// Connect returns a client for c.Redis after checking that Redis answers.
// It also routes go-redis's own log lines (a refused dial while Redis
// restarts, printed outside slog by default) to a debug-level logger,
// which drops them: the examples report Redis's errors themselves.
func (c *Config) Connect(ctx context.Context) (*redis.Client, error) {
	redislog.Route(Logger(), slog.LevelDebug)
	opts := &redis.Options{Addr: c.Redis}
	if u, err := redis.ParseURL(c.Redis); err == nil {
		opts = u
	}
	// Without it go-redis ignores ctx deadlines on socket reads.
	opts.ContextTimeoutEnabled = true
	rdb := redis.NewClient(opts)
	pctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	if err := rdb.Ping(pctx).Err(); err != nil {
		_ = rdb.Close()
		return nil, fmt.Errorf("redis at %s does not answer: %w", c.Redis, err)
	}
	return rdb, nil
}

// Logger is a text logger on stderr.
func Logger() *slog.Logger {
	return slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelInfo}))
}
