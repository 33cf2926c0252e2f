package main

import (
	"context"
	"errors"
	"fmt"
	"io"

	"github.com/shepherd-go/shepherd/pool"
)

func init() {
	commands["dispatch"] = command{summary: "start jobs in a pool", run: runDispatch}
	commands["notify"] = command{summary: "send a notification to a job's worker", run: runNotify}
}

func runDispatch(args []string, stdout, stderr io.Writer) int {
	return perKey("dispatch", "dispatch -pool NAME [-payload TEXT] KEY...", "the jobs' `payload`", "started",
		args, stdout, stderr, func(n *pool.Node, ctx context.Context, key string, payload []byte) error {
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

func runNotify(args []string, stdout, stderr io.Writer) int {
	return perKey("notify", "notify -pool NAME -payload TEXT KEY...", "the notification's `payload`", "notified",
		args, stdout, stderr, func(n *pool.Node, ctx context.Context, key string, payload []byte) error {
			if err := n.NotifyWorker(ctx, key, payload); err != nil {
				return fmt.Errorf("%s: %w", key, err)
			}
			return nil
		})
}

// perKey runs call with the -payload flag for every KEY argument, printing
// "KEY done" for each success and failing if any call failed.
func perKey(name, usage, payloadDoc, done string, args []string, stdout, stderr io.Writer,
	call func(n *pool.Node, ctx context.Context, key string, payload []byte) error) int {
	c := newClientFlags(name, usage, stderr)
	payload := c.fs.String("payload", "", payloadDoc)
	if code, ok := parse(c.fs, args); !ok {
		return code
	}
	if code, ok := c.check(stderr, 1); !ok {
		return code
	}
	return c.withClient(stderr, func(ctx context.Context, cl *client) error {
		var errs []error
		for _, key := range c.fs.Args() {
			if err := call(cl.node, ctx, key, []byte(*payload)); err != nil {
				errs = append(errs, err)
				continue
			}
			fmt.Fprintf(stdout, "%s %s\n", key, done)
		}
		return errors.Join(errs...)
	})
}

// errNotConfirmed: the operator did not confirm a destructive command.
var errNotConfirmed = errors.New("not confirmed (pass -yes to skip the question)")
