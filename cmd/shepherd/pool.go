package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/shepherd-go/shepherd/pool"
)

// The commands that act on a pool through a client-only node: dispatch,
// notify, stop, shutdown (and jobs, in jobs.go).

func dispatchCmd() *cobra.Command {
	return perKeyCmd("dispatch --pool NAME KEY...", "start jobs in a pool", "the jobs' `payload`", "started",
		func(n *pool.Node, ctx context.Context, key string, payload []byte) error {
			// Without a live worker DispatchJob would wait for one until
			// -timeout: say why at once instead.
			live, err := n.LiveWorkers(ctx)
			if err != nil {
				return err
			}
			if live == 0 {
				return fmt.Errorf("%s: not dispatched: pool %q has no live worker to start it", key, n.PoolName())
			}
			if err := n.DispatchJob(ctx, key, payload); err != nil {
				return fmt.Errorf("%s: %w", key, err)
			}
			return nil
		})
}

func notifyCmd() *cobra.Command {
	return perKeyCmd("notify --pool NAME --payload TEXT KEY...", "send a notification to a job's worker",
		"the notification's `payload`", "notified",
		func(n *pool.Node, ctx context.Context, key string, payload []byte) error {
			if err := n.NotifyWorker(ctx, key, payload); err != nil {
				return fmt.Errorf("%s: %w", key, err)
			}
			return nil
		})
}

// perKeyCmd returns a command that runs call with the -payload flag for
// every KEY argument, printing "KEY done" for each success and failing if
// any call failed.
func perKeyCmd(use, short, payloadDoc, done string,
	call func(n *pool.Node, ctx context.Context, key string, payload []byte) error) *cobra.Command {
	var p poolFlags
	var payload string
	cmd := &cobra.Command{
		Use:     use,
		Short:   short,
		GroupID: groupPool,
		Args:    rangeArgs(1, -1, "missing job key"),
		RunE: func(cmd *cobra.Command, keys []string) error {
			if err := p.check(); err != nil {
				return err
			}
			return p.withClient(cmd.ErrOrStderr(), func(ctx context.Context, cl *client) error {
				var errs []error
				for _, key := range keys {
					if err := call(cl.node, ctx, key, []byte(payload)); err != nil {
						errs = append(errs, err)
						continue
					}
					fmt.Fprintf(cmd.OutOrStdout(), "%s %s\n", key, done)
				}
				return errors.Join(errs...)
			})
		},
	}
	p.register(cmd.Flags())
	cmd.Flags().StringVar(&payload, "payload", "", payloadDoc)
	return cmd
}

func stopCmd() *cobra.Command {
	var p poolFlags
	var yes bool
	cmd := &cobra.Command{
		Use:     "stop --pool NAME KEY...",
		Short:   "stop jobs (asks for confirmation)",
		GroupID: groupPool,
		Args:    rangeArgs(1, -1, "missing job key"),
		RunE: func(cmd *cobra.Command, keys []string) error {
			if err := p.check(); err != nil {
				return err
			}
			if !yes && !confirm(cmd.ErrOrStderr(), fmt.Sprintf("stop %d job(s) in pool %q?", len(keys), p.pool)) {
				return errNotConfirmed
			}
			return p.withClient(cmd.ErrOrStderr(), func(ctx context.Context, cl *client) error {
				var errs []error
				for _, key := range keys {
					if err := cl.node.StopJob(ctx, key); err != nil {
						errs = append(errs, fmt.Errorf("%s: %w", key, err))
						continue
					}
					fmt.Fprintf(cmd.OutOrStdout(), "%s stopped\n", key)
				}
				return errors.Join(errs...)
			})
		},
	}
	p.register(cmd.Flags())
	cmd.Flags().BoolVar(&yes, "yes", false, "do not ask for confirmation")
	return cmd
}

func shutdownCmd() *cobra.Command {
	var p poolFlags
	var yes bool
	cmd := &cobra.Command{
		Use:     "shutdown --pool NAME",
		Short:   "stop every job and delete the pool (asks for confirmation)",
		GroupID: groupPool,
		Args:    noArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := p.check(); err != nil {
				return err
			}
			if !yes && !confirm(cmd.ErrOrStderr(), fmt.Sprintf("stop every job of pool %q on every node and delete the pool?", p.pool)) {
				return errNotConfirmed
			}
			return p.withClient(cmd.ErrOrStderr(), func(ctx context.Context, cl *client) error {
				if err := cl.node.Shutdown(ctx); err != nil {
					return err
				}
				fmt.Fprintf(cmd.OutOrStdout(), "pool %s shut down\n", p.pool)
				return nil
			})
		},
	}
	p.register(cmd.Flags())
	cmd.Flags().BoolVar(&yes, "yes", false, "do not ask for confirmation")
	return cmd
}

// errNotConfirmed: the operator did not confirm a destructive command.
var errNotConfirmed = errors.New("not confirmed (pass -yes to skip the question)")

// poolFlags are the flags every pool command has.
type poolFlags struct {
	addr    string
	pool    string
	timeout time.Duration
}

func (p *poolFlags) register(fs *pflag.FlagSet) {
	redisFlag(fs, &p.addr)
	fs.StringVar(&p.pool, "pool", "", "the pool's `name` (required)")
	fs.DurationVar(&p.timeout, "timeout", 30*time.Second, "give up after this `duration`")
}

// check validates the flags after parsing.
func (p *poolFlags) check() error {
	switch {
	case p.pool == "":
		return usagef("-pool is required")
	case p.timeout <= 0:
		return usagef("-timeout must be positive")
	}
	return nil
}

// client is a client-only node of a pool and its Redis client.
type client struct {
	rdb  redis.UniversalClient
	node *pool.Node
}

// join connects to Redis and joins the pool as a client-only node, which
// logs its errors to stderr: it routes no job and hosts no worker, and
// leaves with close. A pool that Redis holds nothing of is an error: a
// misspelt name must not create a pool.
func (p *poolFlags) join(ctx context.Context, stderr io.Writer) (*client, error) {
	rdb, err := connect(ctx, p.addr)
	if err != nil {
		return nil, err
	}
	exists, err := pool.Exists(ctx, rdb, p.pool)
	if err == nil && !exists {
		err = notFound(ctx, rdb, "pool", p.pool)
	}
	if err != nil {
		_ = rdb.Close()
		return nil, err
	}
	node, err := pool.AddNode(ctx, rdb, p.pool, pool.WithClientOnly(), pool.WithLogger(nodeLogger(stderr)))
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
// Ctrl-C.
func (p *poolFlags) withClient(stderr io.Writer, f func(ctx context.Context, cl *client) error) error {
	ctx, cancel := interruptible()
	defer cancel()
	ctx, cancelT := context.WithTimeout(ctx, p.timeout)
	defer cancelT()
	cl, err := p.join(ctx, stderr)
	if err != nil {
		return err
	}
	err = f(ctx, cl)
	if cerr := cl.close(ctx); cerr != nil {
		err = errors.Join(err, fmt.Errorf("leaving the pool: %w", cerr))
	}
	return err
}
