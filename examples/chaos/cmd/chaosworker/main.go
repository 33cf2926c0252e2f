// Command chaosworker is the worker process of the chaos suite: one pool
// node with several workers whose handler records every Start and Stop in
// the suite's log. It prints "ready" once its workers are added, closes
// its node (handing its jobs over) on SIGTERM or SIGINT, and exits when
// the pool shuts down. The suite builds and runs it; it is not a tool.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/shepherd-go/shepherd/examples/chaos"
	"github.com/shepherd-go/shepherd/internal/redislog"
	"github.com/shepherd-go/shepherd/pool"
)

func main() { os.Exit(run(os.Args[1:], os.Stdout, os.Stderr)) }

type config struct {
	addr, pool, logKey, name string
	logAddr                  string // the log's Redis, if not addr's
	cluster                  bool   // addr is a node of a Redis Cluster
	shards                   int
	workers                  int
	ttl, pending, shutdown   time.Duration
	block                    time.Duration
	slowPrefix               string
	slow                     time.Duration
	failPrefix, panicPrefix  string
	stopDelay                time.Duration
	shared                   bool
	verbose                  bool
}

func run(args []string, stdout, stderr io.Writer) int {
	var c config
	fs := flag.NewFlagSet("chaosworker", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.StringVar(&c.addr, "addr", "", "Redis address")
	fs.StringVar(&c.pool, "pool", "", "pool name")
	fs.StringVar(&c.logKey, "log", "", "Redis key of the event log")
	fs.StringVar(&c.logAddr, "log-addr", "", "the log's Redis (default: -addr; a standalone Redis, also with -cluster)")
	fs.BoolVar(&c.cluster, "cluster", false, "-addr is a node of a Redis Cluster")
	fs.IntVar(&c.shards, "shards", 1, "the pool's shard count")
	fs.StringVar(&c.name, "name", "", "process name in the log")
	fs.IntVar(&c.workers, "workers", 3, "workers on this node")
	fs.DurationVar(&c.ttl, "ttl", time.Second, "WorkerTTL")
	fs.DurationVar(&c.pending, "pending", 2*time.Second, "PendingJobTTL")
	fs.DurationVar(&c.shutdown, "shutdown-ttl", 5*time.Second, "WorkerShutdownTTL")
	fs.DurationVar(&c.block, "block", time.Second, "JobSinkBlockDuration (0: the pool's default)")
	fs.StringVar(&c.slowPrefix, "slow-prefix", "", "keys whose first Start sleeps -slow")
	fs.DurationVar(&c.slow, "slow", 0, "how long a slow Start sleeps")
	fs.StringVar(&c.failPrefix, "fail-prefix", "", "keys whose Start fails")
	fs.StringVar(&c.panicPrefix, "panic-prefix", "", "keys whose Stop panics (after it stopped the job)")
	fs.DurationVar(&c.stopDelay, "stop-delay", 0, "how long every Stop takes (closing a connection, say)")
	fs.BoolVar(&c.shared, "shared", false, "one handler for all the workers, keyed by job key (the common way); logged as worker \"shared\"")
	fs.BoolVar(&c.verbose, "v", false, "log the pool's warnings to stderr")
	if err := fs.Parse(args); err != nil {
		return 2
	}
	if c.addr == "" || c.pool == "" || c.logKey == "" || c.name == "" || c.workers < 1 || c.shards < 1 {
		fmt.Fprintln(stderr, "chaosworker: -addr, -pool, -log, -name, -workers >= 1 and -shards >= 1 are required")
		return 2
	}
	if err := serve(c, stdout, stderr); err != nil {
		fmt.Fprintln(stderr, "chaosworker:", err)
		return 1
	}
	return 0
}

func serve(c config, stdout, stderr io.Writer) error {
	var rdb redis.UniversalClient = redis.NewClient(&redis.Options{Addr: c.addr, PoolSize: 20, ContextTimeoutEnabled: true})
	if c.cluster {
		_ = rdb.Close()
		rdb = redis.NewClusterClient(&redis.ClusterOptions{Addrs: []string{c.addr}, PoolSize: 20, ContextTimeoutEnabled: true})
	}
	defer rdb.Close()
	logRdb := rdb
	if c.logAddr != "" {
		logRdb = redis.NewClient(&redis.Options{Addr: c.logAddr, PoolSize: 20, ContextTimeoutEnabled: true})
		defer logRdb.Close()
	}
	level := slog.LevelError
	if c.verbose {
		level = slog.LevelWarn
	}
	logger := slog.New(slog.NewTextHandler(stderr, &slog.HandlerOptions{Level: level})).With("proc", c.name)
	redislog.Route(logger, slog.LevelDebug) // the faults make go-redis complain; the pool reports what matters
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	opts := []pool.NodeOption{pool.WithWorkerTTL(c.ttl), pool.WithPendingJobTTL(c.pending),
		pool.WithWorkerShutdownTTL(c.shutdown), pool.WithLogger(logger)}
	if c.block > 0 {
		opts = append(opts, pool.WithJobSinkBlockDuration(c.block))
	}
	shardOpts, err := chaos.ShardOptions(c.shards)
	if err != nil {
		return err
	}
	opts = append(opts, shardOpts...)
	node, err := pool.AddNode(ctx, rdb, c.pool, opts...)
	if err != nil {
		return err
	}
	log := chaos.NewLog(logRdb, c.logKey)
	// The log maps the node to this process, for the check that compares
	// the pool's records with the handlers' last events.
	if err := log.AppendRetry(ctx, chaos.EvJoin, c.name, "", node.ID()); err != nil {
		return errors.Join(err, node.Close(context.Background()))
	}
	shared := &handler{cfg: c, log: log, worker: "shared"}
	for i := 0; i < c.workers; i++ {
		h := &handler{cfg: c, log: log, worker: fmt.Sprintf("w%d", i)}
		if c.shared {
			h = shared
		}
		if _, err := node.AddWorker(ctx, h); err != nil {
			return errors.Join(err, node.Close(context.Background()))
		}
	}
	fmt.Fprintln(stdout, "ready")

	sig := make(chan os.Signal, 1)
	signal.Notify(sig, syscall.SIGTERM, syscall.SIGINT)
	defer signal.Stop(sig)
	select {
	case <-sig:
		cctx, ccancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer ccancel()
		return node.Close(cctx)
	case <-node.Done():
		return nil // the pool shut down; the node stopped its jobs
	}
}

// handler records its Starts and Stops in the log, and misbehaves for the
// keys its flags name. With -shared one handler serves every worker of the
// process, as most users write it: its Stop(key) stops whatever run of key
// it started, so the pool must never call it for a run that was not the
// last Start of key on this node.
type handler struct {
	cfg    config
	log    *chaos.Log
	worker string
}

func (h *handler) Start(ctx context.Context, job *pool.Job) error {
	if h.cfg.slowPrefix != "" && strings.HasPrefix(job.Key, h.cfg.slowPrefix) && job.Attempt == 1 {
		time.Sleep(h.cfg.slow) // deliberately ignores ctx: a stuck Start
	}
	if h.cfg.failPrefix != "" && strings.HasPrefix(job.Key, h.cfg.failPrefix) {
		return fmt.Errorf("chaosworker: %s refuses to start", job.Key)
	}
	// The job counts as started only once the log says so; a Start that
	// cannot record itself fails, and the pool retries or reports it.
	lctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 2*time.Second)
	defer cancel()
	err := h.log.Append(lctx, chaos.EvStart, h.cfg.name, h.worker, job.Key)
	if err != nil {
		// The append may have reached Redis without its reply reaching
		// us (Redis killed or frozen): cancel it, or the log would show
		// a job that never started.
		sctx, scancel := context.WithTimeout(context.WithoutCancel(ctx), 20*time.Second)
		defer scancel()
		err = errors.Join(err, h.log.AppendRetry(sctx, chaos.EvStop, h.cfg.name, h.worker, job.Key))
	}
	return err
}

func (h *handler) Stop(ctx context.Context, key string) error {
	// The job stops whatever happens; its record must reach the log even
	// if ctx already ended (a Start that overran PendingJobTTL) or Redis
	// is briefly away.
	lctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 20*time.Second)
	defer cancel()
	if h.cfg.stopDelay > 0 {
		time.Sleep(h.cfg.stopDelay) // tearing the job down takes a while
	}
	err := h.log.AppendRetry(lctx, chaos.EvStop, h.cfg.name, h.worker, key)
	if h.cfg.panicPrefix != "" && strings.HasPrefix(key, h.cfg.panicPrefix) {
		panic("chaosworker: Stop panics for " + key)
	}
	return err
}
