// Command pool joins the pool "ingest" with 2 workers, dispatches 3 keyed
// long-running jobs, stops one, and runs until SIGINT or SIGTERM. Run it
// twice: when one process stops, its jobs start on the other.
package main

import (
	"context"
	"errors"
	"flag"
	"log"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/shepherd-go/shepherd/pool"
)

// tenant runs a job per tenant. A real Start starts the job's work (a
// goroutine, a subscription) and returns; Stop ends it. One handler serves
// every worker of the process: the pool calls it for one key at a time.
type tenant struct{}

func (tenant) Start(ctx context.Context, job *pool.Job) error {
	log.Printf("%s: started with %q", job.Key, job.Payload)
	return nil
}

func (tenant) Stop(ctx context.Context, key string) error {
	log.Printf("%s: stopped", key)
	return nil
}

func main() {
	addr := flag.String("redis", os.Getenv("REDIS_ADDR"), "Redis host:port (default $REDIS_ADDR)")
	flag.Parse()
	if *addr == "" {
		log.Fatal("pool: no Redis: pass -redis host:port or set REDIS_ADDR")
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := run(ctx, *addr); err != nil && !errors.Is(err, context.Canceled) {
		log.Fatal("pool: ", err)
	}
}

func run(ctx context.Context, addr string) (err error) {
	rdb := redis.NewClient(&redis.Options{Addr: addr, ContextTimeoutEnabled: true})
	defer rdb.Close()
	node, err := pool.AddNode(ctx, rdb, "ingest")
	if err != nil {
		return err
	}
	defer func() { // leave: this node's jobs start on other nodes, or wait for one
		cctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		err = errors.Join(err, node.Close(cctx))
	}()
	for range 2 {
		if _, err := node.AddWorker(ctx, tenant{}); err != nil {
			return err
		}
	}
	for _, key := range []string{"tenant-1", "tenant-2", "tenant-3"} {
		// nil: a worker's Start returned nil; the job runs until StopJob.
		err := node.DispatchJob(ctx, key, []byte("config of "+key))
		if err != nil && !errors.Is(err, pool.ErrJobExists) { // exists: from a run before
			return err
		}
	}
	if err := node.StopJob(ctx, "tenant-3"); err != nil {
		return err
	}
	log.Print("running; Ctrl-C to leave the pool")
	select {
	case <-ctx.Done():
	case <-node.Done(): // the pool was shut down: shepherd shutdown -pool ingest
	}
	return nil
}
