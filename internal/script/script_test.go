package script

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/shepherd-go/shepherd/internal/redistest"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

var srv *redistest.Server

func TestMain(m *testing.M) { redistest.Main(m, &srv) }

// echo returns ARGV[1] and sets KEYS[1] to it.
var echo = redis.NewScript(`redis.call("SET", KEYS[1], ARGV[1]); return ARGV[1]`)

// fail raises a Lua error.
var fail = redis.NewScript(`return redis.error_reply("BOOM it failed")`)

// none returns nil (redis.Nil to the client).
var none = redis.NewScript(`return false`)

func TestRun(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	key := redistest.Name(t)

	res, err := Run(ctx, srv.Client(), echo, "echo", []string{key}, "hello")
	require.NoError(t, err)
	assert.Equal(t, "hello", res)

	// After SCRIPT FLUSH (as after a restart) the script is loaded again.
	require.NoError(t, srv.Client().ScriptFlush(ctx).Err())
	res, err = Run(ctx, srv.Client(), echo, "echo", []string{key}, "again")
	require.NoError(t, err)
	assert.Equal(t, "again", res)

	_, err = Run(ctx, srv.Client(), fail, "rmap.set", []string{key})
	require.Error(t, err)
	assert.Contains(t, err.Error(), "rmap.set: BOOM")

	_, err = Run(ctx, srv.Client(), none, "none", []string{key})
	assert.True(t, errors.Is(err, redis.Nil))

	cctx, ccancel := context.WithCancel(ctx)
	ccancel()
	_, err = Run(cctx, srv.Client(), echo, "echo", []string{key}, "x")
	assert.ErrorIs(t, err, context.Canceled)
}
