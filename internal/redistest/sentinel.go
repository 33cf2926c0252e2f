package redistest

import (
	"context"
	"errors"
	"fmt"
	"os/exec"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
)

// Sentinels is a private primary, its replicas and three sentinels watching
// them, every one a redis-server process of its own on a free 127.0.0.1
// port. The data nodes are plain Servers (Kill, Restart, Freeze work as
// usual); the sentinels belong to the group and die with it. Its methods
// are safe for concurrent use.
//
// The sentinels use quorum 2, down-after-milliseconds as WithDownAfter
// says (1 s by default), failover-timeout 3 s and parallel-syncs 1. A
// planned Failover takes about a second, one after a Kill about
// WithDownAfter plus 1.5 s. Sentinel turns a former primary that runs
// again (still up after Failover, or restarted after Kill) into a replica
// of the new master only about 10 s after it reports itself master: two
// INFO rounds of a replica, 10 s apart, built into Redis and not
// configurable. Until then it is a second master; WaitReplicasSynced
// waits for the end of that.
type Sentinels struct {
	cfg       sentinelConfig
	servers   []*Server               // data nodes; 0 is the first primary
	sentinels []*process              // the sentinels' processes
	probes    []*redis.SentinelClient // one per sentinel, by index
	addrs     []string                // the sentinels' host:port, by index

	mu      sync.Mutex
	closed  bool
	clients []*redis.Client // NewFailoverClient's
}

// SentinelOption configures a Sentinels group.
type SentinelOption func(*sentinelConfig)

type sentinelConfig struct {
	replicas  int
	downAfter time.Duration
	dataArgs  []string
	binary    string
}

func defaultSentinelConfig() sentinelConfig {
	return sentinelConfig{replicas: 1, downAfter: time.Second, binary: defaultConfig().binary}
}

// WithSentinelReplicas sets how many replicas the first primary gets.
// Defaults to 1; 0 gives a group no failover can succeed in.
func WithSentinelReplicas(n int) SentinelOption {
	return func(c *sentinelConfig) { c.replicas = n }
}

// WithDownAfter sets the sentinels' down-after-milliseconds: how long a
// node must not answer before a sentinel thinks it down, the start of
// every failover after a Kill. Defaults to 1 s; Redis counts whole
// milliseconds.
func WithDownAfter(d time.Duration) SentinelOption {
	return func(c *sentinelConfig) { c.downAfter = d }
}

// WithDataArgs appends raw redis-server arguments for the primary and the
// replicas (not the sentinels), for example
// WithDataArgs("--min-replicas-to-write", "1"). Defaults to none.
func WithDataArgs(args ...string) SentinelOption {
	return func(c *sentinelConfig) { c.dataArgs = append(c.dataArgs, args...) }
}

// sentinelMasterName is the name the sentinels monitor the primary by.
const sentinelMasterName = "redistest"

// Sentinel settings that are not options. failoverTimeout is short so that
// a replica pointing at the wrong master is fixed within seconds (Sentinel
// waits failover-timeout before +fix-slave-config) and a stuck failover is
// given up soon.
const (
	sentinelCount   = 3
	sentinelQuorum  = 2
	failoverTimeout = 3 * time.Second
)

// Deadlines of the group's own waits. sentinelsStartTimeout bounds
// NewSentinels: starting the nodes, the replicas' first sync and the
// sentinels' discovery of each other (about 2 s: they greet every 2 s).
const (
	sentinelsStartTimeout = 60 * time.Second
	sentinelPollEvery     = 50 * time.Millisecond
	sentinelCallTimeout   = 2 * time.Second
)

// StartSentinels starts a Sentinels group for tb (one primary,
// WithSentinelReplicas replicas, default 1, and three sentinels) and
// closes it, processes killed and directories removed, when tb's test
// ends. It returns once every replica is in sync and every sentinel knows
// the primary, each replica and the two other sentinels, so a Failover
// may follow at once; that takes about two seconds, most of it the
// sentinels finding each other (they greet every 2 s). It fails tb (never
// skips) when the group cannot start, with a message that says what to
// install when redis-server is missing. There is no container fallback.
func StartSentinels(tb testing.TB, opts ...SentinelOption) *Sentinels {
	tb.Helper()
	g, err := NewSentinels(opts...)
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() {
		if err := g.Close(); err != nil {
			tb.Errorf("redistest: close sentinels: %v", err)
		}
	})
	return g
}

// NewSentinels is StartSentinels without a test: the caller must Close
// the group.
func NewSentinels(opts ...SentinelOption) (*Sentinels, error) {
	cfg := defaultSentinelConfig()
	for _, o := range opts {
		o(&cfg)
	}
	if cfg.replicas < 0 {
		return nil, fmt.Errorf("redistest: %d sentinel replicas: may not be negative", cfg.replicas)
	}
	if cfg.downAfter < time.Millisecond {
		return nil, fmt.Errorf("redistest: down-after %v: must be at least 1ms", cfg.downAfter)
	}
	binary, err := exec.LookPath(cfg.binary)
	if err != nil {
		return nil, fmt.Errorf("redistest: Sentinels need a redis-server binary (no container fallback): %w. "+
			"Install redis-server (Debian/Ubuntu: apt-get install redis-server; macOS: brew install redis)", err)
	}
	cfg.binary = binary
	ctx, cancel := context.WithTimeout(context.Background(), sentinelsStartTimeout)
	defer cancel()
	g := &Sentinels{cfg: cfg}
	if err := g.start(ctx); err != nil {
		return nil, errors.Join(err, g.Close())
	}
	return g, nil
}

// MasterName returns the name the sentinels monitor the primary by.
func (g *Sentinels) MasterName() string { return sentinelMasterName }

// SentinelAddrs returns the three sentinels' host:port addresses.
func (g *Sentinels) SentinelAddrs() []string { return slices.Clone(g.addrs) }

// Servers returns the data nodes: index 0 is the first primary, the
// others its first replicas. Which is master now is the sentinels' word:
// ask Primary.
func (g *Sentinels) Servers() []*Server { return slices.Clone(g.servers) }

// Close closes the group's clients, kills the sentinels, closes the data
// nodes and removes every directory. It is idempotent.
func (g *Sentinels) Close() error {
	g.mu.Lock()
	if g.closed {
		g.mu.Unlock()
		return nil
	}
	g.closed = true
	clients := g.clients
	g.mu.Unlock()

	var errs []error
	for _, c := range clients {
		if err := c.Close(); err != nil && !errors.Is(err, redis.ErrClosed) {
			errs = append(errs, err)
		}
	}
	for _, c := range g.probes {
		errs = append(errs, c.Close())
	}
	for _, p := range g.sentinels {
		errs = append(errs, p.destroy())
	}
	for _, s := range g.servers {
		errs = append(errs, s.Close())
	}
	return errors.Join(errs...)
}
