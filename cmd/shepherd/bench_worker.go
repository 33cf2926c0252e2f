package main

import (
	"bufio"
	"context"
	"flag"
	"fmt"
	"io"
	"os"
	"strconv"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/shepherd-go/shepherd/pool"
)

// benchChildEnv marks a process the bench started as a worker process
// (see bench_child_test.go: a test binary re-executed as a child).
const benchChildEnv = "SHEPHERD_BENCH_CHILD"

func init() {
	// The bench starts it as a separate process; not for direct use.
	commands["bench-worker"] = command{summary: "(internal) worker process for bench scenario C", run: runBenchWorker}
}

// runBenchWorker hosts workers for scenario C. It prints "ready" once its
// workers are registered, then one line per Start ("S key unixnano") and
// Stop ("X key unixnano"), and leaves when its stdin closes or the pool
// shuts down.
func runBenchWorker(args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("bench-worker", flag.ContinueOnError)
	fs.SetOutput(stderr)
	addr := fs.String("redis", "", "Redis address")
	name := fs.String("pool", "", "pool name")
	workers := fs.Int("workers", 4, "workers to host")
	ttl := fs.Duration("ttl", 2*time.Second, "WorkerTTL")
	if err := fs.Parse(args); err != nil || *addr == "" || *name == "" {
		return exitUsage
	}
	ctx := context.Background()
	rdb := redis.NewClient(&redis.Options{Addr: *addr, PoolSize: 16 + 4**workers})
	defer rdb.Close()
	node, err := pool.AddNode(ctx, rdb, *name, pool.WithWorkerTTL(*ttl))
	if err != nil {
		fmt.Fprintln(stderr, err)
		return exitError
	}
	out := &lineWriter{w: bufio.NewWriter(stdout)}
	for range *workers {
		if _, err := node.AddWorker(ctx, out); err != nil {
			fmt.Fprintln(stderr, err)
			_ = node.Close(ctx)
			return exitError
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
	if err := node.Close(ctx); err != nil {
		fmt.Fprintln(stderr, err)
		return exitError
	}
	return exitOK
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
