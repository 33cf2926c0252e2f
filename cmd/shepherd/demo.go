package main

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"sort"
	"sync"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/spf13/cobra"

	"github.com/shepherd-go/shepherd/pool"
)

// demoConfig holds the demo's knobs.
type demoConfig struct {
	jobs        int
	nodes       int
	workers     int
	ttl         time.Duration
	concurrency int
	pool        string
}

// demoCmd is "shepherd demo", with "demo queue" under it.
func demoCmd() *cobra.Command {
	var cfg demoConfig
	var addr string
	cmd := &cobra.Command{
		Use:     "demo",
		Short:   "a one-command tour: nodes, workers, a crash, recovery, nothing lost ('demo queue': the queue's)",
		GroupID: groupOther,
		Args:    noArgs,
		RunE:    func(cmd *cobra.Command, _ []string) error { return runDemo(cmd.OutOrStdout(), addr, cfg) },
	}
	fs := cmd.Flags()
	redisFlag(fs, &addr)
	fs.Lookup("redis").Usage = demoRedisUsage
	fs.IntVar(&cfg.jobs, "jobs", 2000, "how many jobs to dispatch")
	fs.IntVar(&cfg.nodes, "nodes", 3, "how many nodes (at least 2: one crashes)")
	fs.IntVar(&cfg.workers, "workers", 4, "workers per node")
	fs.DurationVar(&cfg.ttl, "ttl", 2*time.Second, "worker TTL: how long a silent worker lives on before its jobs move")
	fs.IntVar(&cfg.concurrency, "concurrency", 32, "DispatchJob calls in flight")
	fs.StringVar(&cfg.pool, "pool", "", "pool name (default: a fresh shepherd-demo-<random>)")
	cmd.AddCommand(demoQueueCmd())
	return cmd
}

func runDemo(stdout io.Writer, addr string, cfg demoConfig) error {
	switch {
	case cfg.jobs < 1 || cfg.workers < 1 || cfg.concurrency < 1:
		return usagef("-jobs, -workers and -concurrency must be at least 1")
	case cfg.nodes < 2:
		return usagef("-nodes must be at least 2: one of them crashes")
	case cfg.ttl <= 0:
		return usagef("-ttl must be positive")
	}
	if cfg.pool == "" {
		cfg.pool = "shepherd-demo-" + randomHex(3)
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
	err = (&demo{cfg: cfg, out: stdout, addr: r.addr, origin: r.origin, private: r.private}).run(ctx)
	if rerr := r.release(); rerr != nil {
		err = errors.Join(err, fmt.Errorf("releasing Redis: %w", rerr))
	}
	return err
}

func randomHex(n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b) // crypto/rand.Read never fails (Go 1.24)
	return hex.EncodeToString(b)
}

// demoNode is a node of the demo with its own Redis client, as if it were
// its own process.
type demoNode struct {
	label   string
	rdb     *redis.Client
	node    *pool.Node
	workers map[string]string // worker id → label
	dead    atomic.Bool
}

// demo runs the tour.
type demo struct {
	cfg     demoConfig
	out     io.Writer
	addr    string
	origin  string
	private bool // the demo started its Redis, and removes it on exit
	state   *demoState
	nodes   []*demoNode
	labels  map[string]string // worker id → label, all nodes
}

func (d *demo) printf(format string, args ...any) { fmt.Fprintf(d.out, format, args...) }

func (d *demo) run(ctx context.Context) (err error) {
	d.state = newDemoState()
	d.labels = map[string]string{}
	opt, err := redisOptions(d.addr)
	if err != nil {
		return err
	}
	d.printf("Redis: %s\n", d.origin)
	d.printf("pool %q: %d nodes x %d workers, worker TTL %v, %d jobs\n\n", d.cfg.pool, d.cfg.nodes, d.cfg.workers, d.cfg.ttl, d.cfg.jobs)
	defer func() { err = errors.Join(err, d.cleanup(opt)) }()
	if err := d.start(ctx, opt); err != nil {
		return err
	}
	keys, elapsed, err := d.dispatch(ctx)
	if err != nil {
		return err
	}
	rate := float64(len(keys)) / elapsed.Seconds()
	d.printf("\njobs per worker:\n")
	d.chart(nil)

	victim := d.nodes[len(d.nodes)-1]
	recovery, moved, err := d.crashAndRecover(ctx, victim, keys)
	if err != nil {
		return err
	}
	d.printf("\njobs per worker after the recovery:\n")
	d.chart(map[string]bool{victim.label: true})

	if err := d.verify(ctx, keys); err != nil {
		return err
	}
	_, _, restarts, doubles := d.counts()
	d.printf("\nsummary\n")
	d.printf("  dispatched: %d jobs in %v (%.0f jobs/s, %d DispatchJob calls in flight)\n", len(keys), elapsed.Round(time.Millisecond), rate, d.cfg.concurrency)
	d.printf("  crash:      %s and its %d workers, holding %d jobs\n", victim.label, d.cfg.workers, moved)
	d.printf("  recovery:   all %d jobs running again %v after the crash (worker TTL %v); %d restarts in all\n", moved, recovery.Round(time.Millisecond), d.cfg.ttl, restarts)
	d.printf("  lost:       0 of %d (verified: every dispatched key runs on exactly one live worker; %d double starts)\n", len(keys), doubles)
	return nil
}

func (d *demo) counts() (running int, starts, restarts, doubles int) {
	d.state.mu.Lock()
	defer d.state.mu.Unlock()
	return len(d.state.running), d.state.starts, d.state.restarts, d.state.doubles
}

// start adds the nodes and their workers.
func (d *demo) start(ctx context.Context, opt *redis.Options) error {
	for i := 0; i < d.cfg.nodes; i++ {
		o := *opt
		o.PoolSize = 20 // three blocking reads per node, plus the workers' scripts
		dn := &demoNode{label: fmt.Sprintf("node%d", i+1), rdb: redis.NewClient(&o), workers: map[string]string{}}
		d.nodes = append(d.nodes, dn)
		n, err := pool.AddNode(ctx, dn.rdb, d.cfg.pool,
			pool.WithWorkerTTL(d.cfg.ttl),
			pool.WithPendingJobTTL(2*d.cfg.ttl),
			pool.WithJobSinkBlockDuration(min(d.cfg.ttl, time.Second)),
			pool.WithWorkerShutdownTTL(10*time.Second),
			pool.WithMaxQueuedJobs(max(pool.DefaultMaxQueuedJobs, d.cfg.jobs)))
		if err != nil {
			return err
		}
		dn.node = n
		for j := 0; j < d.cfg.workers; j++ {
			label := fmt.Sprintf("%s/w%d", dn.label, j+1)
			w, err := n.AddWorker(ctx, &demoWorker{label: label, state: d.state, dead: &dn.dead})
			if err != nil {
				return err
			}
			dn.workers[w.ID()] = label
			d.labels[w.ID()] = label
		}
		d.printf("started %s (node %s) with %d workers\n", dn.label, n.ID(), d.cfg.workers)
	}
	return nil
}

// dispatch dispatches the jobs from every node in turn, concurrently.
func (d *demo) dispatch(ctx context.Context) ([]string, time.Duration, error) {
	d.printf("\ndispatching %d jobs:\n", d.cfg.jobs)
	keys := make([]string, d.cfg.jobs)
	for i := range keys {
		keys[i] = fmt.Sprintf("job-%05d", i)
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	next := make(chan int)
	var done atomic.Int64
	var firstErr error
	var errOnce sync.Once
	var wg sync.WaitGroup
	began := time.Now()
	for g := 0; g < d.cfg.concurrency; g++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range next {
				n := d.nodes[i%len(d.nodes)].node
				if err := n.DispatchJob(ctx, keys[i], []byte("demo")); err != nil {
					errOnce.Do(func() { firstErr = fmt.Errorf("dispatch %s: %w", keys[i], err); cancel() })
					continue
				}
				done.Add(1)
			}
		}()
	}
	// The progress bar redraws while the dispatchers work.
	bar := newProgress(d.out, d.cfg.jobs)
	barDone, barExited := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(barExited)
		tick := time.NewTicker(100 * time.Millisecond)
		defer tick.Stop()
		for {
			select {
			case <-barDone:
				return
			case <-tick.C:
				bar.update(int(done.Load()))
			}
		}
	}()
feed:
	for i := range keys {
		select {
		case next <- i:
		case <-ctx.Done():
			break feed
		}
	}
	close(next)
	wg.Wait()
	close(barDone)
	<-barExited
	elapsed := time.Since(began)
	if firstErr != nil {
		return nil, 0, firstErr
	}
	if err := ctx.Err(); err != nil {
		return nil, 0, err
	}
	bar.update(int(done.Load()))
	d.printf("  %d jobs started in %v\n", len(keys), elapsed.Round(time.Millisecond))
	return keys, elapsed, nil
}

// chart shows the jobs per worker, as the handlers see them.
func (d *demo) chart(deadNodes map[string]bool) {
	_, per := d.state.snapshot()
	var labels []string
	dead := map[string]bool{}
	for _, dn := range d.nodes {
		for _, l := range dn.workers {
			labels = append(labels, l)
			dead[l] = deadNodes[dn.label]
		}
	}
	sort.Strings(labels)
	chart(d.out, per, labels, dead)
}
