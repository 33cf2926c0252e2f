package rediscluster

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/redis/go-redis/v9/maintnotifications"
)

// MinMasters is the fewest masters `redis-cli --cluster create` accepts.
const MinMasters = 3

// Slots is the number of hash slots of a Redis Cluster.
const Slots = 16384

// createTimeout bounds redis-cli --cluster create, and waitOK bounds the
// wait for every node to report cluster_state:ok.
const (
	createTimeout = 30 * time.Second
	okTimeout     = 30 * time.Second
)

// ErrNotInstalled is returned (wrapped, with what to install) when
// redis-server or redis-cli cannot be found.
var ErrNotInstalled = errors.New("rediscluster: redis-server and redis-cli are needed")

// Cluster is a private Redis Cluster: masters only, or masters with
// replicas (WithReplicas). Its nodes have indexes 0 to Nodes()-1, in the
// order Start launched them; every method that takes or returns a node
// takes or returns such an index, replicas included. Its methods are safe
// for concurrent use.
type Cluster struct {
	cfg     config
	masters int
	nodes   []*node
	probes  []*redis.Client // one per node, by index: the waits' and the topology queries', no retries
	spare   []int           // the nodes AddMaster added: masters that may serve no slot

	mu      sync.Mutex
	closed  bool
	client  *redis.ClusterClient
	direct  []*redis.Client // one per node, by index
	clients []redis.UniversalClient
}

// Start starts masters×(1+r) redis-server processes with cluster mode on,
// r being WithReplicas' count (0 by default), joins them into one cluster
// with `redis-cli --cluster create --cluster-replicas r`, which spreads
// the slots evenly over masters masters and gives each r replicas, and
// waits until every node reports cluster_state:ok with all 16384 slots
// served and every replica is in sync with its master. masters must be
// at least MinMasters (3). Which nodes redis-cli makes masters is its
// choice: ask MasterNodes and ReplicasOf. The caller must Close the
// cluster. It takes about two seconds, most of it redis-cli waiting for
// the nodes to agree; each step has a deadline of its own (a node's first
// PING 15 s, redis-cli 30 s, cluster_state:ok 30 s) besides ctx's.
func Start(ctx context.Context, masters int, opts ...Option) (*Cluster, error) {
	cfg := defaultConfig()
	for _, o := range opts {
		o(&cfg)
	}
	if masters < MinMasters {
		return nil, fmt.Errorf("rediscluster: %d masters: redis-cli --cluster create needs at least %d", masters, MinMasters)
	}
	if cfg.replicas < 0 {
		return nil, fmt.Errorf("rediscluster: %d replicas a master: it may not be negative", cfg.replicas)
	}
	server, err := exec.LookPath(cfg.server)
	if err != nil {
		return nil, notInstalled(err)
	}
	cli, err := exec.LookPath(cfg.cli)
	if err != nil {
		return nil, notInstalled(err)
	}
	c := &Cluster{cfg: cfg, masters: masters}
	ok := false
	defer func() {
		if !ok {
			_ = c.Close()
		}
	}()
	for range masters * (1 + cfg.replicas) {
		if _, err := c.startNode(ctx, server); err != nil {
			return nil, err
		}
	}
	args := []string{"--cluster", "create"}
	args = append(args, c.Addrs()...)
	args = append(args, "--cluster-replicas", strconv.Itoa(cfg.replicas), "--cluster-yes")
	cctx, cancel := context.WithTimeout(ctx, createTimeout)
	defer cancel()
	if out, err := exec.CommandContext(cctx, cli, args...).CombinedOutput(); err != nil {
		return nil, fmt.Errorf("rediscluster: redis-cli --cluster create: %w: %s", err, out)
	}
	if err := c.waitOK(ctx); err != nil {
		return nil, err
	}
	if err := c.checkRoles(ctx); err != nil {
		return nil, err
	}
	c.client = redis.NewClusterClient(c.options())
	ok = true
	return c, nil
}

// startNode starts one more node, with the redis-server at path, and
// its clients, and returns its index. A node that does not start is left
// out, its directory removed. The caller holds c.mu, or is Start.
func (c *Cluster) startNode(ctx context.Context, path string) (int, error) {
	dir, err := os.MkdirTemp("", "rediscluster-")
	if err != nil {
		return -1, fmt.Errorf("rediscluster: data dir: %w", err)
	}
	n := &node{cfg: &c.cfg, path: path, dir: dir}
	if err := n.start(ctx); err != nil {
		_ = os.RemoveAll(dir)
		return -1, err
	}
	c.nodes = append(c.nodes, n)
	c.direct = append(c.direct, redis.NewClient(&redis.Options{
		Addr:                     n.addr(),
		MaintNotificationsConfig: noMaintNotifications(),
	}))
	c.probes = append(c.probes, redis.NewClient(&redis.Options{
		Addr:                     n.addr(),
		MaxRetries:               -1,
		MaintNotificationsConfig: noMaintNotifications(),
	}))
	return len(c.nodes) - 1, nil
}

func notInstalled(err error) error {
	return fmt.Errorf("%w (%v): install them (Debian/Ubuntu: apt-get install redis-server, "+
		"which brings redis-tools; macOS: brew install redis)", ErrNotInstalled, err)
}

// noMaintNotifications turns off go-redis's maintenance notifications:
// Redis 7 has none, and go-redis v9.22 writes the shared options' mode,
// unsynchronised, when their handshake fails, which races under -race.
func noMaintNotifications() *maintnotifications.Config {
	return &maintnotifications.Config{Mode: maintnotifications.ModeDisabled}
}

// options are the options of the cluster's clients.
func (c *Cluster) options() *redis.ClusterOptions {
	return &redis.ClusterOptions{
		Addrs:                    c.Addrs(),
		MaintNotificationsConfig: noMaintNotifications(),
	}
}

// Addrs returns the nodes' host:port, by node index.
func (c *Cluster) Addrs() []string {
	addrs := make([]string, len(c.nodes))
	for i, n := range c.nodes {
		addrs[i] = n.addr()
	}
	return addrs
}

// Client returns the cluster's shared client. Do not close it: Close does.
func (c *Cluster) Client() *redis.ClusterClient { return c.client }

// NewClient returns a new cluster client with connection pools of its own,
// for what needs separate connections (one client per simulated process).
// poolSize sets its PoolSize per node; 0 keeps go-redis's default. Close
// closes it too; closing it earlier is fine.
func (c *Cluster) NewClient(poolSize int) *redis.ClusterClient {
	o := c.options()
	o.PoolSize = poolSize
	cc := redis.NewClusterClient(o)
	c.mu.Lock()
	c.clients = append(c.clients, cc)
	c.mu.Unlock()
	return cc
}

// checkRoles checks that redis-cli made what Start promises: masters
// masters, each with its replicas.
func (c *Cluster) checkRoles(ctx context.Context) error {
	ms, err := c.MasterNodes(ctx)
	if err != nil {
		return err
	}
	if len(ms) != c.masters {
		return fmt.Errorf("rediscluster: %d nodes serve slots, not %d", len(ms), c.masters)
	}
	for _, m := range ms {
		rs, err := c.ReplicasOf(ctx, m)
		if err != nil {
			return err
		}
		if len(rs) != c.cfg.replicas {
			return fmt.Errorf("rediscluster: master %d has replicas %v, not %d", m, rs, c.cfg.replicas)
		}
	}
	return nil
}

// Node returns a client of node i alone (0 ≤ i < Nodes()), master or
// replica, for INFO, CLUSTER, WAIT and per-node checks. Do not close it:
// Close does.
func (c *Cluster) Node(i int) *redis.Client { return c.direct[i] }

// Masters returns the number of masters Start was asked for: the number
// of nodes that serve slots. Without replicas it is the number of nodes,
// and the masters are nodes 0 to Masters()-1; with replicas, MasterNodes
// tells which nodes they are.
func (c *Cluster) Masters() int { return c.masters }

// Nodes returns the number of nodes, replicas included: Masters()×(1+r)
// with WithReplicas(r).
func (c *Cluster) Nodes() int { return len(c.nodes) }

// Replicas returns the number of replicas a master was given
// (WithReplicas).
func (c *Cluster) Replicas() int { return c.cfg.replicas }

// Pids returns the process id of every running node, by node index (0 for
// a node that is not running), for tests that check what Close left.
func (c *Cluster) Pids() []int {
	c.mu.Lock()
	defer c.mu.Unlock()
	pids := make([]int, len(c.nodes))
	for i, n := range c.nodes {
		pids[i] = n.pid()
	}
	return pids
}

// Dirs returns the nodes' data directories, by node index.
func (c *Cluster) Dirs() []string {
	dirs := make([]string, len(c.nodes))
	for i, n := range c.nodes {
		dirs[i] = n.dir
	}
	return dirs
}

// Kill kills node i with SIGKILL and waits until it is gone. Without
// replicas its slots stay unserved until Restart: commands on them fail,
// and after the node timeout the cluster state turns to fail (unless
// cluster-require-full-coverage is no). With replicas, one of its
// replicas is promoted in its place after the node timeout: see
// WaitFailover.
func (c *Cluster) Kill(i int) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.nodes[i].kill()
}

// Restart starts node i again (killing it first if it runs) on its ports
// with its data directory and cluster configuration, and waits until every
// live node reports cluster_state:ok again, they agree on the slots and
// every replica is in sync (see waitOK). Without WithAOF the node comes
// back empty, still serving its slots if it served them. A master whose
// replica was promoted meanwhile comes back as a replica of it and copies
// its data; one restarted before a replica took over comes back as the
// master, and without WithAOF its replicas then copy its emptiness.
func (c *Cluster) Restart(ctx context.Context, i int) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closed {
		return errors.New("rediscluster: restart of a closed cluster")
	}
	n := c.nodes[i]
	if err := n.kill(); err != nil {
		return err
	}
	if err := n.start(ctx); err != nil {
		return err
	}
	return c.waitOK(ctx)
}

// Close closes the cluster's clients, kills every node and removes the
// nodes' directories. It is idempotent.
func (c *Cluster) Close() error {
	c.mu.Lock()
	if c.closed {
		c.mu.Unlock()
		return nil
	}
	c.closed = true
	clients := append([]redis.UniversalClient{}, c.clients...)
	if c.client != nil {
		clients = append(clients, c.client)
	}
	for _, d := range c.direct {
		clients = append(clients, d)
	}
	for _, p := range c.probes {
		clients = append(clients, p)
	}
	c.mu.Unlock()

	var errs []error
	for _, cl := range clients {
		if err := cl.Close(); err != nil && !errors.Is(err, redis.ErrClosed) {
			errs = append(errs, err)
		}
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, n := range c.nodes {
		errs = append(errs, n.kill(), os.RemoveAll(n.dir))
	}
	return errors.Join(errs...)
}
