package redisutil

import (
	"testing"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/assert"
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
