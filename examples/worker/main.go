// Command worker joins a shepherd pool with a number of workers whose
// handler logs every start, stop and notification. Run several of them and
// a producer (see ../producer) to watch jobs spread, move and survive.
//
//	go run ./examples/worker -workers 4
package main

import (
	"context"
	"flag"
	"fmt"
	"log/slog"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/shepherd-go/shepherd/examples/internal/cli"
	"github.com/shepherd-go/shepherd/pool"
)

// logger is the example JobHandler: a real one would start the job's work
// in Start (a goroutine, a subscription) and end it in Stop.
type logger struct {
	log  *slog.Logger
	name string
}

func (l logger) Start(ctx context.Context, job *pool.Job) error {
	l.log.Info("start", "worker", l.name, "key", job.Key, "payload", string(job.Payload), "attempt", job.Attempt)
	return nil
}

func (l logger) Stop(ctx context.Context, key string) error {
	l.log.Info("stop", "worker", l.name, "key", key)
	return nil
}

func (l logger) HandleNotification(ctx context.Context, key string, payload []byte) error {
	l.log.Info("notify", "worker", l.name, "key", key, "payload", string(payload))
	return nil
}

func main() {
	var cfg cli.Config
	fs := flag.NewFlagSet("worker", flag.ExitOnError)
	cfg.Register(fs)
	workers := fs.Int("workers", 2, "number of workers on this node")
	ttl := fs.Duration("worker-ttl", pool.DefaultWorkerTTL, "worker keep-alive TTL")
	_ = fs.Parse(os.Args[1:])
	if err := run(cfg, *workers, *ttl); err != nil {
		fmt.Fprintln(os.Stderr, "worker:", err)
		os.Exit(1)
	}
}

func run(cfg cli.Config, workers int, ttl time.Duration) error {
	if workers < 1 {
		return fmt.Errorf("-workers must be at least 1")
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	rdb, err := cfg.Connect(ctx)
	if err != nil {
		return err
	}
	defer rdb.Close()
	log := cli.Logger()
	node, err := pool.AddNode(ctx, rdb, cfg.Pool, pool.WithWorkerTTL(ttl), pool.WithLogger(log))
	if err != nil {
		return err
	}
	for i := 0; i < workers; i++ {
		w, err := node.AddWorker(ctx, logger{log: log, name: fmt.Sprint(i)})
		if err != nil {
			_ = node.Close(context.Background())
			return err
		}
		log.Info("worker joined", "pool", cfg.Pool, "worker", w.ID())
	}
	log.Info("node running; Ctrl-C to leave (its jobs move to other nodes)", "node", node.ID())
	select {
	case <-ctx.Done():
	case <-node.Done():
		log.Info("the pool was shut down")
	}
	closeCtx, cancel := context.WithTimeout(context.Background(), pool.DefaultWorkerShutdownTTL)
	defer cancel()
	return node.Close(closeCtx)
}
