package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/spf13/cobra"

	"github.com/shepherd-go/shepherd/queue"
)

// demoQueueConfig holds the knobs of "demo queue".
type demoQueueConfig struct {
	tasks   int
	workers int
	ttl     time.Duration
	queue   string
}

// demoQueueCmd is "shepherd demo queue": two serving processes whose
// workers each own a (pretend) connection, tasks submitted from this
// process, retries, a dead letter, and one process SIGKILLed with tasks in
// flight.
func demoQueueCmd() *cobra.Command {
	var cfg demoQueueConfig
	var addr string
	cmd := &cobra.Command{
		Use:   "queue",
		Short: "the queue's tour: serving processes, retries, a dead letter, a SIGKILL, nothing lost",
		Args:  noArgs,
		RunE:  func(cmd *cobra.Command, _ []string) error { return runDemoQueue(cmd.OutOrStdout(), addr, cfg) },
	}
	fs := cmd.Flags()
	redisFlag(fs, &addr)
	fs.Lookup("redis").Usage = demoRedisUsage
	fs.IntVar(&cfg.tasks, "tasks", 400, "how many tasks to submit")
	fs.IntVar(&cfg.workers, "workers", 4, "workers per serving process")
	fs.DurationVar(&cfg.ttl, "ttl", 2*time.Second, "the queue's TTL: how long a silent process lives on before its tasks run elsewhere")
	fs.StringVar(&cfg.queue, "queue", "", "queue name (default: a fresh shepherd-demo-queue-<random>)")
	return cmd
}

func runDemoQueue(stdout io.Writer, addr string, cfg demoQueueConfig) error {
	switch {
	case cfg.tasks < 10 || cfg.workers < 1:
		return usagef("-tasks must be at least 10 and -workers at least 1")
	case cfg.ttl < queue.MinTTL:
		return usagef("-ttl must be at least %v", queue.MinTTL)
	}
	if cfg.queue == "" {
		cfg.queue = "shepherd-demo-queue-" + randomHex(3)
	}
	if _, err := redisOptions(addr); err != nil {
		return err
	}
	ctx, cancel := interruptible()
	defer cancel()
	r, err := findRedis(ctx, addr, stdout)
	if err != nil {
		return err
	}
	err = demoQueue(ctx, cfg, r, stdout)
	if rerr := r.release(); rerr != nil {
		err = errors.Join(err, fmt.Errorf("releasing Redis: %w", rerr))
	}
	return err
}

// startDemoServer starts a serving process of the demo.
func startDemoServer(ctx context.Context, addr string, cfg demoQueueConfig, label string) (*childProc, error) {
	return startSelf(ctx, nil, "demo-queue-worker", "-redis", addr, "-queue", cfg.queue,
		"-workers", fmt.Sprint(cfg.workers), "-ttl", cfg.ttl.String(), "-label", label)
}

func demoQueue(ctx context.Context, cfg demoQueueConfig, r *demoRedis, out io.Writer) (err error) {
	printf := func(format string, args ...any) { fmt.Fprintf(out, format, args...) }
	opt, err := redisOptions(r.addr)
	if err != nil {
		return err
	}
	printf("Redis: %s\n", r.origin)
	printf("queue %q: 2 serving processes x %d workers (each worker owns a connection), TTL %v, %d tasks\n\n",
		cfg.queue, cfg.workers, cfg.ttl, cfg.tasks)
	rdb := redis.NewClient(opt)
	defer rdb.Close()
	q, err := queue.Open(ctx, rdb, cfg.queue, queue.WithTTL(cfg.ttl), queue.WithLogger(nodeLogger(io.Discard)))
	if err != nil {
		return err
	}
	defer func() { err = errors.Join(err, demoQueueCleanup(q, rdb, cfg, r.private, printf)) }()

	var servers []*childProc
	defer func() {
		for _, s := range servers {
			s.stop()
		}
	}()
	for _, label := range []string{"A", "B"} {
		s, err := startDemoServer(ctx, r.addr, cfg, label)
		if err != nil {
			return fmt.Errorf("serving process %s: %w", label, err)
		}
		servers = append(servers, s)
		printf("started serving process %s (pid %d)\n", label, s.cmd.Process.Pid)
	}

	// Every 10th task fails its first attempt (retried after a backoff);
	// one is malformed (a permanent error: a dead letter).
	futures := make([]*queue.Future, 0, cfg.tasks)
	begin := time.Now()
	for i := range cfg.tasks {
		payload := "ok"
		switch {
		case i == cfg.tasks/3:
			payload = "malformed"
		case i%10 == 9:
			payload = "flaky"
		}
		f, err := q.Submit(ctx, []byte(payload), queue.WithTaskID(fmt.Sprintf("task-%04d", i)), queue.WithMaxAttempts(5))
		if err != nil {
			return fmt.Errorf("submit: %w", err)
		}
		futures = append(futures, f)
	}
	printf("submitted %d tasks in %v\n", cfg.tasks, time.Since(begin).Round(time.Millisecond))

	// Crash B once it runs tasks.
	var finished atomic.Int64
	var wg sync.WaitGroup
	results := make([]struct {
		res []byte
		err error
		at  time.Time
	}, len(futures))
	for i, f := range futures {
		wg.Add(1)
		go func() {
			defer wg.Done()
			results[i].res, results[i].err = f.Wait(ctx)
			results[i].at = time.Now()
			finished.Add(1)
		}()
	}
	victim := servers[1]
	victimID, err := processID(ctx, q, victim.cmd.Process.Pid)
	if err != nil {
		return err
	}
	var victimTasks []string
	for deadline := time.Now().Add(30 * time.Second); len(victimTasks) == 0 || finished.Load() < int64(cfg.tasks/4); {
		if time.Now().After(deadline) {
			return errors.New("process B ran no task within 30s")
		}
		time.Sleep(5 * time.Millisecond) // polling Redis for the servers' progress
		active, err := q.Tasks(ctx, queue.StateActive, 0, 1000)
		if err != nil {
			return err
		}
		victimTasks = victimTasks[:0]
		for _, t := range active {
			if t.Process == victimID {
				victimTasks = append(victimTasks, t.ID)
			}
		}
	}
	printf("\n%d/%d tasks done; crashing process B (SIGKILL) while it runs %d of them\n", finished.Load(), cfg.tasks, len(victimTasks))
	crashed := time.Now()
	if err := victim.kill(); err != nil {
		return err
	}
	victim.stop()
	servers = servers[:1]
	wg.Wait()

	// What happened.
	index := map[string]int{}
	for i, f := range futures {
		index[f.ID()] = i
	}
	var recovered time.Duration
	for _, id := range victimTasks {
		if at := results[index[id]].at.Sub(crashed); at > recovered {
			recovered = at
		}
	}
	if len(victimTasks) > 0 {
		printf("  B's %d tasks in flight were done by A %v after the crash (TTL %v)\n", len(victimTasks), recovered.Round(time.Millisecond), cfg.ttl)
	}
	ok, retried, failed := 0, 0, 0
	for i := range results {
		switch {
		case results[i].err == nil:
			ok++
			if !strings.HasSuffix(string(results[i].res), "attempt 1") {
				retried++
			}
		case errors.Is(results[i].err, queue.ErrFailed):
			failed++
		default:
			return fmt.Errorf("task %s: %w", futures[i].ID(), results[i].err)
		}
	}
	printf("\nsummary\n")
	printf("  succeeded:   %d tasks (%d after more than one attempt: retries and the crash)\n", ok, retried)
	printf("  dead letter: %d\n", failed)
	dead, err := q.DeadLetters(ctx, 0, 10)
	if err != nil {
		return err
	}
	for _, d := range dead {
		printf("    %s %q: %s\n", d.ID, d.Payload, d.Errors[len(d.Errors)-1].Err)
	}
	printf("  lost:        0 of %d (every future completed once)\n", cfg.tasks)
	if ok+failed != cfg.tasks {
		return fmt.Errorf("%d of %d tasks have no outcome", cfg.tasks-ok-failed, cfg.tasks)
	}
	return nil
}

// processID returns the queue's id of the serving process with pid.
func processID(ctx context.Context, q *queue.Queue, pid int) (string, error) {
	st, err := q.Stats(ctx)
	if err != nil {
		return "", err
	}
	for _, p := range st.Processes {
		if p.PID == pid {
			return p.ID, nil
		}
	}
	return "", fmt.Errorf("no process with pid %d serves the queue", pid)
}

// demoQueueCleanup closes the demo's queue handle and deletes the queue's
// keys; private says the demo started its Redis (and removes it on exit).
func demoQueueCleanup(q *queue.Queue, rdb *redis.Client, cfg demoQueueConfig, private bool, printf func(string, ...any)) error {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	err := q.Close(ctx)
	var keys []string
	for _, pattern := range queueKeyPatterns(cfg.queue) {
		iter := rdb.Scan(ctx, 0, pattern, 1000).Iterator()
		for iter.Next(ctx) {
			keys = append(keys, iter.Val())
		}
		err = errors.Join(err, iter.Err())
	}
	if len(keys) > 0 {
		err = errors.Join(err, rdb.Unlink(ctx, keys...).Err())
	}
	if err == nil {
		printf("left behind: nothing (%d keys of queue %s deleted", len(keys), cfg.queue)
		if private {
			printf("; the private Redis the demo started is removed on exit")
		}
		printf(")\n")
	}
	return err
}

// runDemoQueueWorker serves the demo's queue: each worker opens a pretend
// connection; a task sleeps 5 to 30ms, "flaky" fails its first attempt,
// "malformed" fails for good. It prints "ready", and closes its queue when
// its stdin closes.
// demoServerOpts are the flags of demo-queue-worker.
type demoServerOpts struct {
	addr, queue, label string
	workers            int
	ttl                time.Duration
}

// demoQueueWorkerCmd is a serving process of "demo queue", which starts
// it; hidden, not for direct use.
func demoQueueWorkerCmd() *cobra.Command {
	var o demoServerOpts
	cmd := &cobra.Command{
		Use:    "demo-queue-worker --redis ADDR --queue NAME",
		Short:  "(internal) serving process of demo queue",
		Hidden: true,
		Args:   noArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if o.addr == "" || o.queue == "" {
				return usagef("-redis and -queue are required")
			}
			return runDemoServer(cmd.OutOrStdout(), cmd.ErrOrStderr(), o)
		},
	}
	fs := cmd.Flags()
	fs.StringVar(&o.addr, "redis", "", "Redis address or URL")
	fs.StringVar(&o.queue, "queue", "", "queue name")
	fs.IntVar(&o.workers, "workers", 4, "workers")
	fs.DurationVar(&o.ttl, "ttl", 2*time.Second, "TTL")
	fs.StringVar(&o.label, "label", "", "the process's label")
	return cmd
}

// runDemoServer serves the demo's queue; it prints "ready" once it
// serves, and leaves when its stdin closes.
func runDemoServer(stdout, stderr io.Writer, o demoServerOpts) error {
	opt, err := redisOptions(o.addr)
	if err != nil {
		return err
	}
	ctx := context.Background()
	rdb := redis.NewClient(opt)
	defer rdb.Close()
	q, err := queue.Open(ctx, rdb, o.queue, queue.WithTTL(o.ttl), queue.WithLogger(nodeLogger(stderr)))
	if err != nil {
		return err
	}
	type conn struct{ id string }
	res := queue.Resource[*conn]{Open: func(ctx context.Context, worker int) (*conn, error) {
		return &conn{id: fmt.Sprintf("%s%d", o.label, worker)}, nil
	}}
	_, err = queue.ServeWith(q, res, func(ctx context.Context, c *conn, t *queue.Task) ([]byte, error) {
		select {
		case <-time.After(time.Duration(5+rand.IntN(26)) * time.Millisecond):
		case <-ctx.Done():
			return nil, ctx.Err()
		}
		switch string(t.Payload) {
		case "malformed":
			return nil, queue.Permanent(errors.New("malformed payload"))
		case "flaky":
			if t.Attempt == 1 {
				return nil, errors.New("the API timed out")
			}
		}
		return []byte(fmt.Sprintf("done on connection %s, attempt %d", c.id, t.Attempt)), nil
	}, queue.WithWorkers(o.workers), queue.WithBackoff(50*time.Millisecond, time.Second))
	if err != nil {
		_ = q.Close(ctx)
		return err
	}
	fmt.Fprintln(stdout, "ready")
	_, _ = io.Copy(io.Discard, os.Stdin)
	cctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	return q.Close(cctx)
}
