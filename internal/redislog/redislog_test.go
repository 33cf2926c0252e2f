package redislog

import (
	"bytes"
	"context"
	"log/slog"
	"net"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/shepherd-go/shepherd/internal/testlog"
)

// A failed dial, which go-redis reports with its own logger, reaches the
// slog logger at the chosen level, and not below it.
func TestRouteSendsGoRedisLinesToSlog(t *testing.T) {
	var buf testlog.Buffer
	Route(slog.New(slog.NewTextHandler(&buf, &slog.HandlerOptions{Level: slog.LevelDebug})), slog.LevelInfo)
	// A port nobody listens on: take one and close it.
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	addr := ln.Addr().String()
	require.NoError(t, ln.Close())
	rdb := redis.NewClient(&redis.Options{Addr: addr, MaxRetries: -1, DialTimeout: 200 * time.Millisecond})
	defer rdb.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	require.Error(t, rdb.Ping(ctx).Err())
	require.Eventually(t, func() bool { return bytes.Contains([]byte(buf.String()), []byte("failed to dial")) },
		10*time.Second, 10*time.Millisecond, "go-redis's dial failure was not routed: %q", buf.String())
	assert.Contains(t, buf.String(), "level=INFO")
	assert.Contains(t, buf.String(), "source=go-redis")

	var quiet testlog.Buffer
	Route(slog.New(slog.NewTextHandler(&quiet, nil)), slog.LevelDebug) // below the handler's Info
	adapter{l: slog.New(slog.NewTextHandler(&quiet, nil)), level: slog.LevelDebug}.Printf(context.Background(), "redis: %s", "noise")
	assert.Empty(t, quiet.String(), "a line below the handler's level was printed")
}
