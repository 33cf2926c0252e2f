package redisutil

import (
	"context"
	"fmt"
	"testing"

	"github.com/redis/go-redis/v9"
	"github.com/shepherd-go/shepherd/internal/redistest"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func TestIsNil(t *testing.T) {
	var c *redis.Client
	var cc *redis.ClusterClient
	var r *redis.Ring
	assert.True(t, IsNil(nil))
	assert.True(t, IsNil(c), "a nil *redis.Client inside the interface")
	assert.True(t, IsNil(cc))
	assert.True(t, IsNil(r))
	live := redis.NewClient(&redis.Options{Addr: "127.0.0.1:1"})
	defer live.Close()
	assert.False(t, IsNil(live))
}

// Redis error replies are recognised by their code, also wrapped and also
// raised inside a script; other errors have no code.
func TestErrorCode(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s := redistest.Start(t)
	rdb := s.Client()
	err := rdb.XReadGroup(ctx, &redis.XReadGroupArgs{Group: "g", Consumer: "c", Streams: []string{"nope", ">"}, Block: -1}).Err()
	assert.Equal(t, "NOGROUP", ErrorCode(err))
	assert.True(t, HasErrorCode(fmt.Errorf("op: %w", err), "NOGROUP"), "wrapped")
	require.NoError(t, rdb.XAdd(ctx, &redis.XAddArgs{Stream: "s", Values: []any{"f", "v"}}).Err())
	err = rdb.Eval(ctx, `return redis.call("XPENDING", KEYS[1], "nogroup")`, []string{"s"}).Err()
	assert.Equal(t, "NOGROUP", ErrorCode(err), "raised in a script: %v", err)
	err = rdb.EvalSha(ctx, "0123456789012345678901234567890123456789", nil).Err()
	assert.True(t, HasErrorCode(err, "NOSCRIPT"), "%v", err)
	assert.Empty(t, ErrorCode(context.Canceled))
	assert.Empty(t, ErrorCode(nil))
	assert.False(t, HasErrorCode(nil, ""))
	assert.Empty(t, ErrorCode(redis.Nil), "redis.Nil is no error reply")
}

// UnlinkMatching deletes what matches, on a single server and on every
// master of a cluster, and nothing else; UnlinkCount says how many (2,500
// keys: several pipelines of a thousand).
func TestUnlinkMatching(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	for _, rdb := range []redis.UniversalClient{redistest.Start(t).Client(), redistest.StartCluster(t, 3).Client()} {
		var mine []string
		for i := range 50 {
			mine = append(mine, fmt.Sprintf("{t%d}:x", i)) // many slots: every master
		}
		for _, k := range append(mine, "other") {
			require.NoError(t, rdb.Set(ctx, k, "v", 0).Err())
		}
		require.NoError(t, UnlinkMatching(ctx, rdb, "{t*}:x"))
		for i := range 2500 {
			require.NoError(t, rdb.Set(ctx, fmt.Sprintf("{c%d}:y", i), "v", 0).Err())
		}
		n, err := UnlinkCount(ctx, rdb, "{c*}:y")
		require.NoError(t, err)
		assert.Equal(t, 2500, n)
		n, err = UnlinkCount(ctx, rdb, "{c*}:y")
		require.NoError(t, err)
		assert.Zero(t, n, "nothing left to count")
		for _, k := range mine {
			n, err := rdb.Exists(ctx, k).Result()
			require.NoError(t, err)
			assert.Zero(t, n, k)
		}
		left, err := rdb.Exists(ctx, "other").Result()
		require.NoError(t, err)
		assert.EqualValues(t, 1, left)
	}
}
