// Package redisutil holds small helpers about go-redis clients that every
// shepherd package needs.
package redisutil

import (
	"errors"
	"strings"

	"github.com/redis/go-redis/v9"
)

// IsNil reports whether rdb is nil, or a nil client pointer inside a
// non-nil interface (which a plain rdb == nil misses).
func IsNil(rdb redis.UniversalClient) bool {
	switch c := rdb.(type) {
	case nil:
		return true
	case *redis.Client:
		return c == nil
	case *redis.ClusterClient:
		return c == nil
	case *redis.Ring:
		return c == nil
	}
	return false
}

// ErrorCode returns the code of the Redis error reply that err is or
// wraps: its first word (NOGROUP, NOPERM, NOSCRIPT, BUSYGROUP, ERR...), as
// Redis sends it, also for an error raised inside a Lua script. It returns
// "" when err carries no error reply (a network or context error,
// redis.Nil, nil).
// Every shepherd package recognises Redis errors with it.
func ErrorCode(err error) string {
	var re redis.Error
	if !errors.As(err, &re) || errors.Is(err, redis.Nil) {
		return ""
	}
	code, _, _ := strings.Cut(re.Error(), " ")
	return code
}

// HasErrorCode reports whether err carries a Redis error reply with code.
func HasErrorCode(err error, code string) bool { return err != nil && ErrorCode(err) == code }
