package main

import (
	"context"
	"errors"
	"fmt"
	"io"
)

func init() {
	commands["stop"] = command{summary: "stop jobs (asks for confirmation)", run: runStop}
	commands["shutdown"] = command{summary: "stop every job and delete the pool (asks for confirmation)", run: runShutdown}
}

func runStop(args []string, stdout, stderr io.Writer) int {
	c := newClientFlags("stop", "stop -pool NAME [-yes] KEY...", stderr)
	yes := c.fs.Bool("yes", false, "do not ask for confirmation")
	if code, ok := parse(c.fs, args); !ok {
		return code
	}
	if code, ok := c.check(stderr, 1); !ok {
		return code
	}
	keys := c.fs.Args()
	if !*yes && !confirm(stderr, fmt.Sprintf("stop %d job(s) in pool %q?", len(keys), *c.pool)) {
		return fail(stderr, "stop", errNotConfirmed)
	}
	return c.withClient(stderr, func(ctx context.Context, cl *client) error {
		var errs []error
		for _, key := range keys {
			if err := cl.node.StopJob(ctx, key); err != nil {
				errs = append(errs, fmt.Errorf("%s: %w", key, err))
				continue
			}
			fmt.Fprintf(stdout, "%s stopped\n", key)
		}
		return errors.Join(errs...)
	})
}

func runShutdown(args []string, stdout, stderr io.Writer) int {
	c := newClientFlags("shutdown", "shutdown -pool NAME [-yes] [-timeout 30s]", stderr)
	yes := c.fs.Bool("yes", false, "do not ask for confirmation")
	if code, ok := parse(c.fs, args); !ok {
		return code
	}
	if code, ok := c.check(stderr, 0); !ok {
		return code
	}
	if c.fs.NArg() > 0 {
		return usageError(c.fs, stderr, "unexpected arguments %q", c.fs.Args())
	}
	if !*yes && !confirm(stderr, fmt.Sprintf("stop every job of pool %q on every node and delete the pool?", *c.pool)) {
		return fail(stderr, "shutdown", errNotConfirmed)
	}
	return c.withClient(stderr, func(ctx context.Context, cl *client) error {
		if err := cl.node.Shutdown(ctx); err != nil {
			return err
		}
		fmt.Fprintf(stdout, "pool %s shut down\n", *c.pool)
		return nil
	})
}
