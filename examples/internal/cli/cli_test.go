package cli

import (
	"context"
	"flag"
	"testing"

	"github.com/shepherd-go/shepherd/internal/redistest"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

var srv *redistest.Server

func TestMain(m *testing.M) { redistest.Main(m, &srv) }

func TestRegisterDefaultsAndEnv(t *testing.T) {
	var c Config
	fs := flag.NewFlagSet("x", flag.ContinueOnError)
	t.Setenv("REDIS_ADDR", "")
	c.Register(fs)
	require.NoError(t, fs.Parse(nil))
	assert.Equal(t, "localhost:6379", c.Redis)
	assert.Equal(t, "demo", c.Pool)

	t.Setenv("REDIS_ADDR", "redis:6380")
	var d Config
	fs = flag.NewFlagSet("y", flag.ContinueOnError)
	d.Register(fs)
	require.NoError(t, fs.Parse([]string{"-pool", "p"}))
	assert.Equal(t, "redis:6380", d.Redis)
	assert.Equal(t, "p", d.Pool)
}

func TestConnect(t *testing.T) {
	ctx := context.Background()
	c := Config{Redis: srv.Addr()}
	rdb, err := c.Connect(ctx)
	require.NoError(t, err)
	require.NoError(t, rdb.Close())

	c = Config{Redis: "redis://" + srv.Addr() + "/0"}
	rdb, err = c.Connect(ctx)
	require.NoError(t, err, "redis:// URLs work")
	require.NoError(t, rdb.Close())

	c = Config{Redis: "127.0.0.1:1"}
	_, err = c.Connect(ctx)
	require.Error(t, err)
	assert.Contains(t, err.Error(), "does not answer")
}
