// Command queue serves the queue "thumbnails" with 4 workers, each owning a
// resource, submits 3 tasks, prints how each ended, and serves until SIGINT
// or SIGTERM.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"log"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/shepherd-go/shepherd/queue"
)

// renderer stands for what a worker owns: a browser, a connection, a GPU.
type renderer struct{ worker int }

// render is the handler: an error is retried, queue.Permanent(err) is not.
func render(ctx context.Context, r *renderer, t *queue.Task) ([]byte, error) {
	if len(t.Payload) == 0 {
		return nil, queue.Permanent(errors.New("empty name"))
	}
	return fmt.Appendf(nil, "thumbnail of %s by worker %d", t.Payload, r.worker), nil
}

func main() {
	addr := flag.String("redis", os.Getenv("REDIS_ADDR"), "Redis host:port (default $REDIS_ADDR)")
	flag.Parse()
	if *addr == "" {
		log.Fatal("queue: no Redis: pass -redis host:port or set REDIS_ADDR")
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := run(ctx, *addr); err != nil && !errors.Is(err, context.Canceled) {
		log.Fatal("queue: ", err)
	}
}

func run(ctx context.Context, addr string) (err error) {
	rdb := redis.NewClient(&redis.Options{Addr: addr, ContextTimeoutEnabled: true})
	defer rdb.Close()
	q, err := queue.Open(ctx, rdb, "thumbnails")
	if err != nil {
		return err
	}
	defer func() { // stop serving: wait up to 10s for the tasks in flight, then cancel them
		cctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		err = errors.Join(err, q.Close(cctx))
	}()
	// In the serving processes: 4 workers, each with its own renderer.
	_, err = queue.ServeWith(q, queue.Resource[*renderer]{
		Open: func(ctx context.Context, worker int) (*renderer, error) { return &renderer{worker}, nil },
	}, render, queue.WithWorkers(4))
	if err != nil {
		return err
	}
	// Anywhere: submit, then wait for the outcome.
	for _, name := range []string{"cat.png", "dog.png", ""} {
		f, err := q.Submit(ctx, []byte(name), queue.WithMaxAttempts(5), queue.WithTimeout(30*time.Second))
		if err != nil {
			return err // nothing was queued
		}
		res, err := f.Wait(ctx) // or later, from any process: q.Result(ctx, f.ID())
		var failed *queue.TaskError
		switch {
		case errors.As(err, &failed):
			log.Printf("task %s failed: %v", f.ID(), failed)
		case err != nil:
			return err
		default:
			log.Printf("task %s: %s", f.ID(), res)
		}
	}
	log.Print("serving; Ctrl-C to stop")
	<-ctx.Done()
	return nil
}
