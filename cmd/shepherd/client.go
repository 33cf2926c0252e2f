package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/shepherd-go/shepherd/pool"
)

// clientFlags are the flags of the commands that act on a pool through a
// client-only node: jobs, dispatch, stop, notify, shutdown.
type clientFlags struct {
	fs      *flag.FlagSet
	addr    *string
	pool    *string
	timeout *time.Duration
}

func newClientFlags(name, synopsis string, stderr io.Writer) *clientFlags {
	fs := newFlags(name, synopsis, stderr)
	return &clientFlags{
		fs:      fs,
		addr:    redisFlag(fs),
		pool:    fs.String("pool", "", "the pool's `name` (required)"),
		timeout: fs.Duration("timeout", 30*time.Second, "give up after this `duration`"),
	}
}

// check validates the common flags after parsing; minArgs is the least
// number of positional arguments (keys).
func (c *clientFlags) check(stderr io.Writer, minArgs int) (int, bool) {
	if *c.pool == "" {
		return usageError(c.fs, stderr, "-pool is required"), false
	}
	if *c.timeout <= 0 {
		return usageError(c.fs, stderr, "-timeout must be positive"), false
	}
	if c.fs.NArg() < minArgs {
		return usageError(c.fs, stderr, "missing job key"), false
	}
	return exitOK, true
}

// client is a client-only node of a pool and its Redis client.
type client struct {
	rdb  *redis.Client
	node *pool.Node
}

// join connects to Redis and joins the pool as a client-only node: it
// routes no job and hosts no worker, and leaves with close. A pool that
// Redis holds nothing of is an error: a misspelt name must not create a
// pool.
func (c *clientFlags) join(ctx context.Context) (*client, error) {
	rdb, err := connect(ctx, *c.addr)
	if err != nil {
		return nil, err
	}
	exists, err := pool.Exists(ctx, rdb, *c.pool)
	if err == nil && !exists {
		err = poolNotFound(*c.pool)
	}
	if err != nil {
		_ = rdb.Close()
		return nil, err
	}
	node, err := pool.AddNode(ctx, rdb, *c.pool, pool.WithClientOnly(), pool.WithLogger(nodeLogger(c.fs.Output())))
	if err != nil {
		_ = rdb.Close()
		return nil, err
	}
	return &client{rdb: rdb, node: node}, nil
}

// close leaves the pool and closes the Redis client.
func (c *client) close(ctx context.Context) error {
	err := c.node.Close(context.WithoutCancel(ctx))
	if errors.Is(err, pool.ErrPoolShutdown) {
		err = nil
	}
	return errors.Join(err, c.rdb.Close())
}

// withClient runs f with a client of the pool, within the timeout and
// Ctrl-C, and turns its error into an exit code.
func (c *clientFlags) withClient(stderr io.Writer, f func(ctx context.Context, cl *client) error) int {
	ctx, cancel := interruptible()
	defer cancel()
	ctx, cancelT := context.WithTimeout(ctx, *c.timeout)
	defer cancelT()
	cl, err := c.join(ctx)
	if err != nil {
		return fail(stderr, c.fs.Name(), err)
	}
	err = f(ctx, cl)
	if cerr := cl.close(ctx); cerr != nil {
		err = errors.Join(err, fmt.Errorf("leaving the pool: %w", cerr))
	}
	if err != nil {
		return fail(stderr, c.fs.Name(), err)
	}
	return exitOK
}
