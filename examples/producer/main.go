// Command producer dispatches jobs to a shepherd pool, notifies one, stops
// one, and with -shutdown shuts the whole pool down.
//
//	go run ./examples/producer -jobs 20
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"time"

	"github.com/shepherd-go/shepherd/examples/internal/cli"
	"github.com/shepherd-go/shepherd/pool"
)

func main() {
	var cfg cli.Config
	fs := flag.NewFlagSet("producer", flag.ExitOnError)
	cfg.Register(fs)
	jobs := fs.Int("jobs", 10, "number of jobs to dispatch")
	shutdown := fs.Bool("shutdown", false, "shut the pool down at the end (stops every job on every node)")
	timeout := fs.Duration("timeout", 30*time.Second, "how long to wait for each dispatch")
	_ = fs.Parse(os.Args[1:])
	if err := run(cfg, *jobs, *shutdown, *timeout); err != nil {
		fmt.Fprintln(os.Stderr, "producer:", err)
		os.Exit(1)
	}
}

func run(cfg cli.Config, jobs int, shutdown bool, timeout time.Duration) error {
	if jobs < 1 {
		return fmt.Errorf("-jobs must be at least 1")
	}
	ctx := context.Background()
	rdb, err := cfg.Connect(ctx)
	if err != nil {
		return err
	}
	defer rdb.Close()
	// A client-only node dispatches but routes nothing and hosts no worker.
	node, err := pool.AddNode(ctx, rdb, cfg.Pool, pool.WithClientOnly())
	if err != nil {
		return err
	}
	defer node.Close(ctx)

	start := time.Now()
	for i := 0; i < jobs; i++ {
		key := fmt.Sprintf("job-%d", i)
		dctx, cancel := context.WithTimeout(ctx, timeout)
		err := node.DispatchJob(dctx, key, []byte(fmt.Sprintf("payload %d", i)))
		cancel()
		switch {
		case errors.Is(err, pool.ErrJobExists):
			fmt.Println(key, "already runs")
		case errors.Is(err, context.DeadlineExceeded):
			return fmt.Errorf("dispatch %s: no worker started it within %v; is a worker running?", key, timeout)
		case err != nil:
			return fmt.Errorf("dispatch %s: %w", key, err)
		}
	}
	fmt.Printf("dispatched %d jobs in %v\n", jobs, time.Since(start).Round(time.Millisecond))

	if err := node.NotifyWorker(ctx, "job-0", []byte("hello from the producer")); err != nil {
		return fmt.Errorf("notify job-0: %w", err)
	}
	fmt.Println("notified job-0")
	if jobs > 1 {
		if err := node.StopJob(ctx, "job-1"); err != nil {
			return fmt.Errorf("stop job-1: %w", err)
		}
		fmt.Println("stopped job-1")
	}
	st, err := node.Stats(ctx)
	if err != nil {
		return err
	}
	for _, w := range st.Workers {
		fmt.Printf("worker %s (node %s, slot %d, healthy %v): %d jobs\n", w.ID, w.Node, w.Slot, w.Healthy, len(w.Keys))
	}
	if shutdown {
		sctx, cancel := context.WithTimeout(ctx, time.Minute)
		defer cancel()
		if err := node.Shutdown(sctx); err != nil {
			return fmt.Errorf("shutdown: %w", err)
		}
		fmt.Println("pool shut down")
	}
	return nil
}
