package main

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"

	"github.com/shepherd-go/shepherd/examples/internal/cli"
	"github.com/shepherd-go/shepherd/pool"
	"github.com/shepherd-go/shepherd/shepherdtest"
)

func TestMain(m *testing.M) {
	// go-redis probes a server whose dial failed from a goroutine that
	// ends up to a second after its client closed: not ours to wait for.
	goleak.VerifyTestMain(m, goleak.IgnoreAnyFunction("github.com/redis/go-redis/v9/internal/pool.(*ConnPool).tryDial"))
}

type nop struct{}

func (nop) Start(context.Context, *pool.Job) error                   { return nil }
func (nop) Stop(context.Context, string) error                       { return nil }
func (nop) HandleNotification(context.Context, string, []byte) error { return nil }

// The producer dispatches its jobs, each with its payload, and stops
// job-1.
func TestProducerDispatchesAndStops(t *testing.T) {
	t.Parallel()
	rdb := shepherdtest.Redis(t)
	cfg := cli.Config{Redis: rdb.Options().Addr, Pool: "producer"}
	p := shepherdtest.StartPool(t, rdb, cfg.Pool, nop{}, shepherdtest.WithNodes(2))

	require.NoError(t, run(cfg, 5, false, 10*time.Second))
	job := p.RequireRunning(t, "job-0")
	assert.Equal(t, "payload 0", string(job.Payload))
	p.RequireStopped(t, "job-1")
	jobs := p.Jobs(t)
	require.Len(t, jobs, 4)
	for i, key := range []string{"job-0", "job-2", "job-3", "job-4"} {
		assert.Equal(t, key, jobs[i].Key)
	}
}

// With -shutdown the pool is gone: its nodes close, its keys are
// deleted.
func TestProducerShutsThePoolDown(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	rdb := shepherdtest.Redis(t)
	cfg := cli.Config{Redis: rdb.Options().Addr, Pool: "producer"}
	p := shepherdtest.StartPool(t, rdb, cfg.Pool, nop{}, shepherdtest.WithNodes(1),
		shepherdtest.WithNodeOptions(pool.WithWorkerTTL(time.Second)))

	require.NoError(t, run(cfg, 5, true, 10*time.Second))
	left, err := rdb.Keys(ctx, "*").Result()
	require.NoError(t, err)
	assert.Empty(t, left, "-shutdown deleted the pool")
	select {
	case <-p.Node().Done():
	case <-ctx.Done():
		t.Fatal("the worker node did not close on shutdown")
	}
}

func TestProducerFailsClearlyWithoutWorkers(t *testing.T) {
	t.Parallel()
	cfg := cli.Config{Redis: shepherdtest.RedisAddr(t), Pool: "producer"}
	err := run(cfg, 1, false, 300*time.Millisecond)
	require.Error(t, err)
	assert.Contains(t, err.Error(), "is a worker running?")
	require.Error(t, run(cfg, 0, false, time.Second))
}
