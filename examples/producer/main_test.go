package main

import (
	"context"
	"testing"
	"time"

	"github.com/shepherd-go/shepherd/examples/internal/cli"
	"github.com/shepherd-go/shepherd/internal/keys"
	"github.com/shepherd-go/shepherd/internal/redistest"
	"github.com/shepherd-go/shepherd/pool"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

var srv *redistest.Server

func TestMain(m *testing.M) { redistest.Main(m, &srv) }

type nop struct{}

func (nop) Start(context.Context, *pool.Job) error                   { return nil }
func (nop) Stop(context.Context, string) error                       { return nil }
func (nop) HandleNotification(context.Context, string, []byte) error { return nil }

func TestProducerDispatchesNotifiesStopsAndShutsDown(t *testing.T) {
	cfg := cli.Config{Redis: srv.Addr(), Pool: redistest.Name(t)}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	node, err := pool.AddNode(ctx, srv.Client(), cfg.Pool, pool.WithWorkerTTL(time.Second))
	require.NoError(t, err)
	defer node.Close(ctx)
	_, err = node.AddWorker(ctx, nop{})
	require.NoError(t, err)

	require.NoError(t, run(cfg, 5, true, 10*time.Second))
	space, err := keys.New(cfg.Pool)
	require.NoError(t, err)
	left, err := srv.Client().Keys(ctx, space.Pattern()).Result()
	require.NoError(t, err)
	assert.Empty(t, left, "-shutdown deleted the pool")
	select {
	case <-node.Done():
	case <-ctx.Done():
		t.Fatal("the worker node did not close on shutdown")
	}
}

func TestProducerFailsClearlyWithoutWorkers(t *testing.T) {
	cfg := cli.Config{Redis: srv.Addr(), Pool: redistest.Name(t)}
	err := run(cfg, 1, false, 300*time.Millisecond)
	require.Error(t, err)
	assert.Contains(t, err.Error(), "is a worker running?")
	require.Error(t, run(cfg, 0, false, time.Second))
}
