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
	"fmt"

	"github.com/redis/go-redis/v9"
)

// Run runs s with keys and args via EVALSHA, falling back to EVAL when the
// script is not cached yet (after a Redis restart, for instance). Errors
// are wrapped as "op: err"; redis.Nil is returned as is, since callers
// branch on it.
func Run(ctx context.Context, rdb redis.Scripter, s *redis.Script, op string, keys []string, args ...any) (any, error) {
	res, err := s.Run(ctx, rdb, keys, args...).Result()
	if err == redis.Nil {
		return nil, redis.Nil
	}
	if err != nil {
		return nil, fmt.Errorf("%s: %w", op, err)
	}
	return res, nil
}
