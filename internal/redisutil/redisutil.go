// Package redisutil holds small helpers about go-redis clients that every
// shepherd package needs.
package redisutil

import (
	"context"
	"errors"
	"strings"
	"sync"

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

// EachMaster runs f on rdb, or on every master of a Redis Cluster: a
// SCAN through a cluster client sees one node only.
func EachMaster(ctx context.Context, rdb redis.UniversalClient, f func(ctx context.Context, c redis.Cmdable) error) error {
	if cc, ok := rdb.(*redis.ClusterClient); ok {
		return cc.ForEachMaster(ctx, func(ctx context.Context, c *redis.Client) error { return f(ctx, c) })
	}
	return f(ctx, rdb)
}

// UnlinkMatching unlinks every key that matches pattern, on every master
// of a cluster (EachMaster). One UNLINK a key, pipelined a thousand at a
// time: a pattern may match keys of several hash slots, which one UNLINK
// of a cluster's node refuses (CROSSSLOT). It returns the first error.
func UnlinkMatching(ctx context.Context, rdb redis.UniversalClient, pattern string) error {
	_, err := UnlinkCount(ctx, rdb, pattern)
	return err
}

// UnlinkCount is UnlinkMatching, and says how many keys it unlinked
// (those that still existed when their UNLINK ran).
func UnlinkCount(ctx context.Context, rdb redis.UniversalClient, pattern string) (int, error) {
	var mu sync.Mutex
	total := 0
	err := EachMaster(ctx, rdb, func(ctx context.Context, c redis.Cmdable) error {
		n := 0
		defer func() {
			mu.Lock()
			total += n
			mu.Unlock()
		}()
		pipe := c.Pipeline()
		var cmds []*redis.IntCmd
		flush := func() error {
			if pipe.Len() == 0 {
				return nil
			}
			_, err := pipe.Exec(ctx)
			for _, c := range cmds {
				n += int(c.Val())
			}
			cmds = cmds[:0]
			return err
		}
		iter := c.Scan(ctx, 0, pattern, 1000).Iterator()
		for iter.Next(ctx) {
			if cmds = append(cmds, pipe.Unlink(ctx, iter.Val())); pipe.Len() == 1000 {
				if err := flush(); err != nil {
					return err
				}
			}
		}
		if err := iter.Err(); err != nil {
			return err
		}
		return flush()
	})
	return total, err
}
