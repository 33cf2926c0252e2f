// Package redisutil holds small helpers about go-redis clients that every
// shepherd package needs.
package redisutil

import "github.com/redis/go-redis/v9"

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
