package rediscluster

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"strings"
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

// Cluster is a private Redis Cluster of masters only (no replicas). Its
// methods are safe for concurrent use.
type Cluster struct {
	cfg   config
	nodes []*node

	mu      sync.Mutex
	closed  bool
	client  *redis.ClusterClient
	direct  []*redis.Client // one per node, by index
	clients []redis.UniversalClient
}

// Start starts masters redis-server processes with cluster mode on, joins
// them into one cluster with `redis-cli --cluster create --cluster-replicas
// 0`, which spreads the slots evenly, and waits until every node reports
// cluster_state:ok with all 16384 slots served. masters must be at least
// MinMasters (3). The caller must Close the cluster. It takes about two
// seconds, most of it redis-cli waiting for the nodes to agree; each step
// has a deadline of its own (a node's first PING 15 s, redis-cli 30 s,
// cluster_state:ok 30 s) besides ctx's.
func Start(ctx context.Context, masters int, opts ...Option) (*Cluster, error) {
	cfg := defaultConfig()
	for _, o := range opts {
		o(&cfg)
	}
	if masters < MinMasters {
		return nil, fmt.Errorf("rediscluster: %d masters: redis-cli --cluster create needs at least %d", masters, MinMasters)
	}
	server, err := exec.LookPath(cfg.server)
	if err != nil {
		return nil, notInstalled(err)
	}
	cli, err := exec.LookPath(cfg.cli)
	if err != nil {
		return nil, notInstalled(err)
	}
	c := &Cluster{cfg: cfg}
	ok := false
	defer func() {
		if !ok {
			_ = c.Close()
		}
	}()
	for range masters {
		dir, err := os.MkdirTemp("", "rediscluster-")
		if err != nil {
			return nil, fmt.Errorf("rediscluster: data dir: %w", err)
		}
		n := &node{cfg: &c.cfg, path: server, dir: dir}
		c.nodes = append(c.nodes, n)
		if err := n.start(ctx); err != nil {
			return nil, err
		}
	}
	args := []string{"--cluster", "create"}
	args = append(args, c.Addrs()...)
	args = append(args, "--cluster-replicas", "0", "--cluster-yes")
	cctx, cancel := context.WithTimeout(ctx, createTimeout)
	defer cancel()
	if out, err := exec.CommandContext(cctx, cli, args...).CombinedOutput(); err != nil {
		return nil, fmt.Errorf("rediscluster: redis-cli --cluster create: %w: %s", err, out)
	}
	if err := c.waitOK(ctx); err != nil {
		return nil, err
	}
	c.client = redis.NewClusterClient(c.options())
	for _, n := range c.nodes {
		c.direct = append(c.direct, redis.NewClient(&redis.Options{
			Addr:                     n.addr(),
			MaintNotificationsConfig: noMaintNotifications(),
		}))
	}
	ok = true
	return c, nil
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

// Node returns a client of node i alone (0 ≤ i < number of masters), for
// INFO, CLUSTER and per-node checks. Do not close it: Close does.
func (c *Cluster) Node(i int) *redis.Client { return c.direct[i] }

// Masters returns the number of nodes, all masters.
func (c *Cluster) Masters() int { return len(c.nodes) }

// NodeOf returns the index of the node that serves key's slot.
func (c *Cluster) NodeOf(ctx context.Context, key string) (int, error) {
	m, err := c.client.MasterForKey(ctx, key)
	if err != nil {
		return -1, fmt.Errorf("rediscluster: node of %q: %w", key, err)
	}
	for i, n := range c.nodes {
		if n.addr() == m.Options().Addr {
			return i, nil
		}
	}
	return -1, fmt.Errorf("rediscluster: key %q is served by %s, which is not one of ours", key, m.Options().Addr)
}

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

// Kill kills node i with SIGKILL and waits until it is gone. Its slots
// stay unserved (there are no replicas) until Restart: commands on them
// fail, and after the node timeout the cluster state turns to fail.
func (c *Cluster) Kill(i int) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.nodes[i].kill()
}

// Restart starts node i again (killing it first if it runs) on its ports
// with its data directory and cluster configuration, and waits until every
// node reports cluster_state:ok again. Without WithAOF the node comes back
// empty, still serving its slots.
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

// waitOK polls CLUSTER INFO on every node until each reports
// cluster_state:ok, all slots assigned and served, and knows every node.
func (c *Cluster) waitOK(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, okTimeout)
	defer cancel()
	want := []string{
		"cluster_state:ok",
		fmt.Sprintf("cluster_slots_assigned:%d", Slots),
		fmt.Sprintf("cluster_slots_ok:%d", Slots),
		fmt.Sprintf("cluster_known_nodes:%d", len(c.nodes)),
	}
	for _, n := range c.nodes {
		rdb := redis.NewClient(&redis.Options{Addr: n.addr(), MaxRetries: -1, MaintNotificationsConfig: noMaintNotifications()})
		err := func() error {
			defer rdb.Close()
			var last string
			for {
				info, err := rdb.ClusterInfo(ctx).Result()
				if err == nil && hasAll(info, want) {
					return nil
				}
				if err != nil {
					last = err.Error()
				} else {
					last = strings.Join(strings.Fields(info), " ")
				}
				select {
				case <-ctx.Done():
					return fmt.Errorf("rediscluster: node %s not ok: %w; last CLUSTER INFO: %s", n.addr(), ctx.Err(), last)
				case <-time.After(20 * time.Millisecond): // polling the nodes' gossip
				}
			}
		}()
		if err != nil {
			return err
		}
	}
	return nil
}

func hasAll(info string, lines []string) bool {
	fields := strings.Fields(info)
	for _, l := range lines {
		found := false
		for _, f := range fields {
			if f == l {
				found = true
				break
			}
		}
		if !found {
			return false
		}
	}
	return true
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
