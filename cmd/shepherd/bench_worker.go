package main

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"os"
	"strconv"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/spf13/cobra"

	"github.com/shepherd-go/shepherd/pool"
	"github.com/shepherd-go/shepherd/queue"
)

// benchChildEnv marks a process the bench started as a worker process
// (see bench_child_test.go: a test binary re-executed as a child).
const benchChildEnv = "SHEPHERD_BENCH_CHILD"

// The processes the bench starts (startSelf) as its workers: hidden
// commands, not for direct use.

// benchWorkerOpts are the flags of bench-worker and bench-queue-worker;
// name is the pool's or the queue's.
type benchWorkerOpts struct {
	addr, name string
	workers    int
	ttl        time.Duration
}

// benchWorkerCmd and benchQueueWorkerCmd return the hidden commands that
// host the bench's workers in a process of their own: run, for a pool or
// a queue (nameFlag), once the flags are checked.
func benchWorkerCmd() *cobra.Command {
	return benchChildCmd("bench-worker", "pool", "(internal) worker process for bench scenario C", runBenchWorker)
}

func benchQueueWorkerCmd() *cobra.Command {
	return benchChildCmd("bench-queue-worker", "queue", "(internal) serving process for bench scenario T4", runBenchQueueWorker)
}

func benchChildCmd(name, nameFlag, short string, run func(stdout io.Writer, o benchWorkerOpts) error) *cobra.Command {
	var o benchWorkerOpts
	cmd := &cobra.Command{
		Use:    name + " --redis ADDR --" + nameFlag + " NAME",
		Short:  short,
		Hidden: true,
		Args:   noArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if o.addr == "" || o.name == "" {
				return usagef("-redis and -%s are required", nameFlag)
			}
			return run(cmd.OutOrStdout(), o)
		},
	}
	fs := cmd.Flags()
	fs.StringVar(&o.addr, "redis", "", "Redis address")
	fs.StringVar(&o.name, nameFlag, "", nameFlag+" name")
	fs.IntVar(&o.workers, "workers", 4, "workers to host")
	fs.DurationVar(&o.ttl, "ttl", 2*time.Second, "the pool's WorkerTTL, or the queue's TTL")
	return cmd
}

// runBenchWorker hosts workers for scenario C. It prints "ready" once its
// workers are registered, then one line per Start ("S key unixnano") and
// Stop ("X key unixnano"), and leaves when its stdin closes or the pool
// shuts down.
func runBenchWorker(stdout io.Writer, o benchWorkerOpts) error {
	ctx := context.Background()
	rdb := redis.NewClient(&redis.Options{Addr: o.addr, PoolSize: 16 + 4*o.workers})
	defer rdb.Close()
	node, err := pool.AddNode(ctx, rdb, o.name, pool.WithWorkerTTL(o.ttl))
	if err != nil {
		return err
	}
	out := &lineWriter{w: bufio.NewWriter(stdout)}
	for range o.workers {
		if _, err := node.AddWorker(ctx, out); err != nil {
			_ = node.Close(ctx)
			return err
		}
	}
	out.line("ready")
	stdinClosed := make(chan struct{})
	go func() { // ends with the process: stdin closes when the bench ends
		_, _ = io.Copy(io.Discard, os.Stdin)
		close(stdinClosed)
	}()
	select {
	case <-stdinClosed:
	case <-node.Done():
	}
	return node.Close(ctx)
}

// runBenchQueueWorker serves a queue for scenario T4 with a handler that
// holds each task for a minute; it prints "ready" once it serves, and
// leaves when its stdin closes.
func runBenchQueueWorker(stdout io.Writer, o benchWorkerOpts) error {
	ctx := context.Background()
	rdb := redis.NewClient(&redis.Options{Addr: o.addr, PoolSize: 64})
	defer rdb.Close()
	q, err := queue.Open(ctx, rdb, o.name, queue.WithTTL(o.ttl))
	if err != nil {
		return err
	}
	defer q.Close(ctx)
	if _, err := q.Serve(func(ctx context.Context, t *queue.Task) ([]byte, error) {
		select {
		case <-ctx.Done():
		case <-time.After(time.Minute):
		}
		return []byte("child"), nil
	}, queue.WithWorkers(o.workers)); err != nil {
		return err
	}
	fmt.Fprintln(stdout, "ready")
	_, _ = io.Copy(io.Discard, os.Stdin)
	return nil
}

// lineWriter is the child's JobHandler: it reports Start and Stop on
// stdout, one flushed line each.
type lineWriter struct {
	mu sync.Mutex
	w  *bufio.Writer
}

func (l *lineWriter) line(s string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	_, _ = l.w.WriteString(s + "\n")
	_ = l.w.Flush()
}

func (l *lineWriter) Start(_ context.Context, job *pool.Job) error {
	l.line("S " + job.Key + " " + strconv.FormatInt(time.Now().UnixNano(), 10))
	return nil
}

func (l *lineWriter) Stop(_ context.Context, key string) error {
	l.line("X " + key + " " + strconv.FormatInt(time.Now().UnixNano(), 10))
	return nil
}
