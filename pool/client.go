package pool

import (
	"log/slog"
	"time"

	"github.com/redis/go-redis/v9"
)

// releaseGrace bounds the cleanup of a node whose AddNode failed: it runs
// after ctx may have ended (Redis unreachable), and must not hold the
// caller much past its deadline. What it could not delete is an empty
// stream and a keep-alive that reads as dead.
const releaseGrace = 250 * time.Millisecond

// warnContextTimeouts warns when rdb ignores context deadlines on socket
// I/O: go-redis applies them only with ContextTimeoutEnabled, and without
// it a call against an unresponsive Redis returns after the client's read
// or write timeout, however short its ctx.
func warnContextTimeouts(logger *slog.Logger, rdb redis.UniversalClient) {
	enabled := true
	switch c := rdb.(type) {
	case *redis.Client:
		enabled = c == nil || c.Options().ContextTimeoutEnabled
	case *redis.ClusterClient:
		enabled = c == nil || c.Options().ContextTimeoutEnabled
	}
	if !enabled {
		logger.Warn("the Redis client ignores context deadlines (ContextTimeoutEnabled is off): calls may outlive their ctx while Redis hangs")
	}
}
