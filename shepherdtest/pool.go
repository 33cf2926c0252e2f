package shepherdtest

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/shepherd-go/shepherd/pool"
)

// Pool is a pool run in the test's process: Nodes full nodes, each with
// its workers, all running one handler, and assertions on its jobs by
// key. Dispatch, stop and notify jobs through any node (or through the
// code under test, on its own node of the same pool).
type Pool struct {
	Name  string
	Nodes []*pool.Node
	rdb   redis.UniversalClient
	wait  time.Duration // WithSettleTimeout's
}

// PoolOption configures StartPool.
type PoolOption func(*poolConfig)

type poolConfig struct {
	nodes, workers int
	node           []pool.NodeOption
	wait           time.Duration
}

// WithNodes sets how many nodes StartPool adds; it panics for n < 1.
// Defaults to 2.
func WithNodes(n int) PoolOption {
	if n < 1 {
		panic(fmt.Sprintf("shepherdtest: WithNodes(%d): a pool needs a node", n))
	}
	return func(c *poolConfig) { c.nodes = n }
}

// WithWorkers sets how many workers each node runs; it panics for n < 1.
// Defaults to 1.
func WithWorkers(n int) PoolOption {
	if n < 1 {
		panic(fmt.Sprintf("shepherdtest: WithWorkers(%d): a node needs a worker", n))
	}
	return func(c *poolConfig) { c.workers = n }
}

// WithNodeOptions passes opts to every AddNode (pool.WithWorkerTTL,
// pool.WithLogger...). Defaults to none: AddNode's defaults.
func WithNodeOptions(opts ...pool.NodeOption) PoolOption {
	return func(c *poolConfig) { c.node = append(c.node, opts...) }
}

// DefaultSettleTimeout is how long a Pool's assertions wait for the
// pool to settle, unless WithSettleTimeout says otherwise.
const DefaultSettleTimeout = 15 * time.Second

// WithSettleTimeout bounds how long RequireRunning, RequireStopped and
// Jobs wait for the pool to settle before they fail the test. Defaults
// to DefaultSettleTimeout.
func WithSettleTimeout(d time.Duration) PoolOption { return func(c *poolConfig) { c.wait = d } }

// StartPool adds the nodes of the pool name on rdb, each with its
// workers running h, and returns once every worker is registered. When
// tb's test ends it shuts the pool down (Node.Shutdown: every job
// stopped, every key of the pool deleted). It fails tb when a node or a
// worker cannot be added.
func StartPool(tb testing.TB, rdb redis.UniversalClient, name string, h pool.JobHandler, opts ...PoolOption) *Pool {
	tb.Helper()
	cfg := poolConfig{nodes: 2, workers: 1, wait: DefaultSettleTimeout}
	for _, o := range opts {
		o(&cfg)
	}
	p := &Pool{Name: name, rdb: rdb, wait: cfg.wait}
	tb.Cleanup(func() { p.shutdown(tb) })
	ctx, cancel := context.WithTimeout(context.Background(), DefaultSettleTimeout)
	defer cancel()
	for i := 0; i < cfg.nodes; i++ {
		n, err := pool.AddNode(ctx, rdb, name, cfg.node...)
		if err != nil {
			tb.Fatalf("shepherdtest: add node %d to pool %q: %v", i, name, err)
		}
		p.Nodes = append(p.Nodes, n)
		for j := 0; j < cfg.workers; j++ {
			if _, err := n.AddWorker(ctx, h); err != nil {
				tb.Fatalf("shepherdtest: add worker %d to node %d of pool %q: %v", j, i, name, err)
			}
		}
	}
	return p
}

// shutdown shuts the pool down through its first node that is still
// open, then closes every node. A pool the test shut down already is
// fine.
func (p *Pool) shutdown(tb testing.TB) {
	ctx, cancel := context.WithTimeout(context.Background(), closeTimeout)
	defer cancel()
	gone := func(err error) bool {
		return err == nil || errors.Is(err, pool.ErrNodeClosed) || errors.Is(err, pool.ErrPoolShutdown)
	}
	for _, n := range p.Nodes {
		if err := n.Shutdown(ctx); !gone(err) {
			tb.Errorf("shepherdtest: shut pool %q down: %v", p.Name, err)
		}
		break
	}
	for _, n := range p.Nodes {
		if err := n.Close(ctx); !gone(err) {
			tb.Errorf("shepherdtest: close a node of pool %q: %v", p.Name, err)
		}
	}
}

// Node returns the pool's first node, to dispatch, notify and stop jobs.
func (p *Pool) Node() *pool.Node { return p.Nodes[0] }

// RequireRunning waits until the job key runs on exactly one worker of
// the pool (pool.InspectJob says running on a healthy worker, and
// pool.Inspect lists the key on that worker alone), and returns what
// InspectJob says of it: its Payload, Worker, Node, Attempt. It fails tb,
// with what the pool says of the job, when that is not so within the
// settle timeout (WithSettleTimeout).
func (p *Pool) RequireRunning(tb testing.TB, key string) *pool.JobInfo {
	tb.Helper()
	var last string
	var info *pool.JobInfo
	p.await(tb, func(ctx context.Context) bool {
		var err error
		info, err = pool.InspectJob(ctx, p.rdb, p.Name, key)
		if err != nil {
			last = err.Error()
			return false
		}
		if info.State != pool.JobRunning || !info.WorkerHealthy {
			last = fmt.Sprintf("state %s on worker %q (healthy: %v), last error %q", info.State, info.Worker, info.WorkerHealthy, info.LastError)
			return false
		}
		st, err := pool.Inspect(ctx, p.rdb, p.Name)
		if err != nil {
			last = err.Error()
			return false
		}
		var on []string
		for _, w := range st.Workers {
			if i := sort.SearchStrings(w.Keys, key); i < len(w.Keys) && w.Keys[i] == key {
				on = append(on, w.ID)
			}
		}
		if len(on) != 1 || on[0] != info.Worker {
			last = fmt.Sprintf("running on worker %q, listed on workers %v", info.Worker, on)
			return false
		}
		return true
	}, func() string {
		return fmt.Sprintf("job %q of pool %q is not running on exactly one worker: %s", key, p.Name, last)
	})
	return info
}

// RequireStopped waits until the pool has no job key (stopped, never
// dispatched, or its Start failed: pool.InspectJob returns
// pool.ErrJobNotFound). It fails tb when the job is still there after
// the settle timeout (WithSettleTimeout).
func (p *Pool) RequireStopped(tb testing.TB, key string) {
	tb.Helper()
	var last string
	p.await(tb, func(ctx context.Context) bool {
		info, err := pool.InspectJob(ctx, p.rdb, p.Name, key)
		switch {
		case errors.Is(err, pool.ErrJobNotFound):
			return true
		case err != nil:
			last = err.Error()
		default:
			last = fmt.Sprintf("state %s on worker %q", info.State, info.Worker)
		}
		return false
	}, func() string { return fmt.Sprintf("job %q of pool %q is not stopped: %s", key, p.Name, last) })
}

// Jobs waits until the pool is settled (no job queued, starting or
// stopping, none on a dead worker) and returns every job, sorted by key,
// as pool.InspectJob reads them. It fails tb when the pool does not
// settle within the settle timeout (WithSettleTimeout).
func (p *Pool) Jobs(tb testing.TB) []*pool.JobInfo {
	tb.Helper()
	var last string
	var jobs []*pool.JobInfo
	p.await(tb, func(ctx context.Context) bool {
		keys, err := pool.JobKeys(ctx, p.rdb, p.Name)
		if err != nil {
			last = err.Error()
			return false
		}
		sort.Strings(keys)
		jobs = jobs[:0]
		for _, k := range keys {
			info, err := pool.InspectJob(ctx, p.rdb, p.Name, k)
			if errors.Is(err, pool.ErrJobNotFound) {
				continue // stopped meanwhile
			}
			if err != nil {
				last = err.Error()
				return false
			}
			if info.State != pool.JobRunning || !info.WorkerHealthy {
				last = fmt.Sprintf("job %q: state %s on worker %q (healthy: %v)", k, info.State, info.Worker, info.WorkerHealthy)
				return false
			}
			jobs = append(jobs, info)
		}
		return true
	}, func() string { return fmt.Sprintf("pool %q did not settle: %s", p.Name, last) })
	return jobs
}

// await polls ok, each call with a ctx of its own, until it returns
// true, failing tb with why() once the settle timeout is over.
func (p *Pool) await(tb testing.TB, ok func(ctx context.Context) bool, why func() string) {
	tb.Helper()
	deadline := time.Now().Add(p.wait)
	for {
		ctx, cancel := context.WithTimeout(context.Background(), closeTimeout)
		done := ok(ctx)
		cancel()
		if done {
			return
		}
		wait := time.Until(deadline)
		if wait <= 0 {
			tb.Fatalf("shepherdtest: %s", why())
		}
		time.Sleep(min(idlePoll, wait))
	}
}
