// Package script runs shepherd's Lua scripts on Redis.
//
// Every script in shepherd is a package-level *redis.Script whose comment
// states its KEYS, ARGV and what it returns. Callers run them through Run,
// so that a script error always names the operation that failed and keeps
// the underlying error (redis.Nil, a context error, a connection error)
// matchable with errors.Is.
package script

import (
	"context"
	"errors"
	"fmt"

	"github.com/redis/go-redis/v9"
)

// Run runs s with keys and args via EVALSHA, falling back to EVAL when the
// script is not cached yet (after a Redis restart, for instance). Errors
// are wrapped as "op: err"; redis.Nil is returned as is, since callers
// branch on it. On a Redis Cluster client, a call that Redis did not
// answer makes the client reload its map of the slots (reloadSlots).
func Run(ctx context.Context, rdb redis.Scripter, s *redis.Script, op string, keys []string, args ...any) (any, error) {
	res, err := s.Run(ctx, rdb, keys, args...).Result()
	if err == redis.Nil {
		return nil, redis.Nil
	}
	if err != nil {
		reloadSlots(rdb, err)
		return nil, fmt.Errorf("%s: %w", op, err)
	}
	return res, nil
}

// reloadSlots makes a Redis Cluster client reload its map of which node
// serves which slot after a call that failed with no answer from Redis
// (refused, reset, timed out): the node may be a master that died, whose
// replica now serves its slots. go-redis reloads the map on a MOVED reply,
// which a dead master never sends, and otherwise only every
// ClusterStateReloadInterval (a minute by default), so that after a
// failover its calls, and its sharded pub/sub, would go on to the dead
// master for up to that long. The reload runs in the background, one at
// a time at most every 200 ms (go-redis), and costs one CLUSTER SLOTS.
// An error reply (a Lua error, CLUSTERDOWN, ...), a closed client or a
// cancelled call reloads nothing.
func reloadSlots(rdb redis.Scripter, err error) {
	cc, ok := rdb.(*redis.ClusterClient)
	if !ok {
		return
	}
	var reply redis.Error
	if errors.As(err, &reply) || errors.Is(err, redis.ErrClosed) || errors.Is(err, context.Canceled) {
		return
	}
	cc.ReloadState(context.Background())
}
