// Command chaosqueue is the serving process of the chaos suite's queue
// scenarios: one queue.Queue with several workers whose handler records
// the start and end of every attempt in the suite's log. A payload
// "panic" panics on the first attempt, "fail" fails it; every attempt
// sleeps 5 to 50ms. It prints "ready" once it serves, and closes the
// queue on SIGTERM or SIGINT. The suite builds and runs it; it is not a
// tool.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/shepherd-go/shepherd/examples/chaos"
	"github.com/shepherd-go/shepherd/internal/redislog"
	"github.com/shepherd-go/shepherd/queue"
)

func main() { os.Exit(run(os.Args[1:], os.Stdout, os.Stderr)) }

func run(args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("chaosqueue", flag.ContinueOnError)
	fs.SetOutput(stderr)
	addr := fs.String("addr", "", "Redis address")
	cluster := fs.Bool("cluster", false, "addr is a node of a Redis Cluster")
	name := fs.String("queue", "", "queue name")
	logKey := fs.String("log", "", "Redis key of the event log")
	proc := fs.String("name", "", "process name in the log")
	workers := fs.Int("workers", 3, "workers")
	prefetch := fs.Int("prefetch", -1, "tasks taken ahead of the workers (queue.WithPrefetch; -1: taken ahead on its own)")
	ttl := fs.Duration("ttl", time.Second, "TTL")
	verbose := fs.Bool("v", false, "log the queue's warnings to stderr")
	if err := fs.Parse(args); err != nil {
		return 2
	}
	if *addr == "" || *name == "" || *logKey == "" || *proc == "" || *workers < 1 {
		fmt.Fprintln(stderr, "chaosqueue: -addr, -queue, -log, -name and -workers >= 1 are required")
		return 2
	}
	var rdb redis.UniversalClient = redis.NewClient(&redis.Options{Addr: *addr, PoolSize: 20, ContextTimeoutEnabled: true})
	if *cluster {
		_ = rdb.Close()
		rdb = redis.NewClusterClient(&redis.ClusterOptions{Addrs: []string{*addr}, PoolSize: 20, ContextTimeoutEnabled: true})
	}
	defer rdb.Close()
	level := slog.LevelError
	if *verbose {
		level = slog.LevelWarn
	}
	logger := slog.New(slog.NewTextHandler(stderr, &slog.HandlerOptions{Level: level})).With("proc", *proc)
	redislog.Route(logger, slog.LevelDebug)
	log := chaos.NewLog(rdb, *logKey)

	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, syscall.SIGINT)
	defer stop()
	q, err := queue.Open(ctx, rdb, *name, queue.WithTTL(*ttl), queue.WithLogger(logger))
	if err != nil {
		fmt.Fprintln(stderr, "chaosqueue:", err)
		return 1
	}
	serveOpts := []queue.ServeOption{queue.WithWorkers(*workers), queue.WithBackoff(10*time.Millisecond, 100*time.Millisecond)}
	if *prefetch >= 0 {
		serveOpts = append(serveOpts, queue.WithPrefetch(*prefetch))
	}
	_, err = q.Serve(func(ctx context.Context, t *queue.Task) ([]byte, error) {
		att := fmt.Sprint(t.Attempt)
		if err := log.AppendRetry(ctx, chaos.EvTaskStart, *proc, att, t.ID); err != nil {
			return nil, err
		}
		time.Sleep(time.Duration(5+rand.IntN(46)) * time.Millisecond)
		if t.Attempt == 1 {
			switch string(t.Payload) {
			case "panic":
				panic("chaos: a handler panics")
			case "fail":
				return nil, errors.New("chaos: a handler fails")
			}
		}
		if err := log.AppendRetry(ctx, chaos.EvTaskEnd, *proc, att, t.ID); err != nil {
			return nil, err
		}
		return []byte(*proc + "/" + att), nil
	}, serveOpts...)
	if err != nil {
		fmt.Fprintln(stderr, "chaosqueue:", err)
		_ = q.Close(context.Background())
		return 1
	}
	fmt.Fprintln(stdout, "ready")
	<-ctx.Done()
	cctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := q.Close(cctx); err != nil {
		fmt.Fprintln(stderr, "chaosqueue:", err)
		return 1
	}
	return 0
}
