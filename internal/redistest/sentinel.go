package redistest

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/redis/go-redis/v9/maintnotifications"
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

// disklessArgs make a full sync start at once, without an RDB file on the
// master's disk. Every data node gets them: any may become the master.
var disklessArgs = []string{"--repl-diskless-sync", "yes", "--repl-diskless-sync-delay", "0"}

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

// start starts the data nodes, waits for the replicas' sync, then starts
// the sentinels and waits until they know the whole group.
func (g *Sentinels) start(ctx context.Context) error {
	primary, err := g.startData()
	if err != nil {
		return err
	}
	for i := 0; i < g.cfg.replicas; i++ {
		if _, err := g.startData("--replicaof", "127.0.0.1", portOf(primary)); err != nil {
			return err
		}
	}
	if err := waitSynced(ctx, primary, g.servers[1:]); err != nil {
		return err
	}
	for i := 0; i < sentinelCount; i++ {
		if err := g.startSentinel(ctx, portOf(primary)); err != nil {
			return err
		}
	}
	return g.waitSentinelsReady(ctx, primary.Addr())
}

// startData starts a data node with args before the caller's WithDataArgs.
func (g *Sentinels) startData(args ...string) (*Server, error) {
	args = slices.Concat(disklessArgs, args, g.cfg.dataArgs)
	s, err := New(WithBinary(g.cfg.binary), WithArgs(args...), withoutContainer())
	if err != nil {
		return nil, err
	}
	g.servers = append(g.servers, s)
	return s, nil
}

// portOf returns the port of s's address.
func portOf(s *Server) string {
	_, p, _ := net.SplitHostPort(s.Addr())
	return p
}

// startSentinel starts one sentinel monitoring the primary on
// primaryPort. A free port can be taken by another process before the
// sentinel binds it, so it retries on a new port, as process.start does.
func (g *Sentinels) startSentinel(ctx context.Context, primaryPort string) error {
	dir, err := os.MkdirTemp("", "redistest-sentinel-")
	if err != nil {
		return fmt.Errorf("redistest: sentinel dir: %w", err)
	}
	p := &process{path: g.cfg.binary, dir: dir}
	g.sentinels = append(g.sentinels, p) // Close removes dir whatever happens
	for attempt := 0; ; attempt++ {
		if p.port, err = freePort(); err != nil {
			return err
		}
		if err = g.launchSentinel(ctx, p, primaryPort); err == nil || attempt == 4 || ctx.Err() != nil {
			break
		}
	}
	if err != nil {
		return err
	}
	g.addrs = append(g.addrs, p.addr())
	g.probes = append(g.probes, redis.NewSentinelClient(&redis.Options{
		Addr:                     p.addr(),
		MaxRetries:               -1,
		DialTimeout:              time.Second,
		ReadTimeout:              sentinelCallTimeout,
		MaintNotificationsConfig: &maintnotifications.Config{Mode: maintnotifications.ModeDisabled},
	}))
	return nil
}

// launchSentinel writes p's configuration file (a sentinel rewrites it, so
// it must be a writable file of its own) and runs `redis-server FILE
// --sentinel` until it answers PING.
func (g *Sentinels) launchSentinel(ctx context.Context, p *process, primaryPort string) error {
	conf := filepath.Join(p.dir, "sentinel.conf")
	if err := os.WriteFile(conf, []byte(g.sentinelConf(p, primaryPort)), 0o600); err != nil {
		return fmt.Errorf("redistest: sentinel config: %w", err)
	}
	if err := p.launch(conf, "--sentinel"); err != nil {
		return err
	}
	if err := waitReady(ctx, p.addr(), "", nil, p.exited); err != nil {
		_ = p.kill()
		return fmt.Errorf("redistest: sentinel: %w; log: %s", err, p.logTail())
	}
	return nil
}

// sentinelConf is a sentinel's configuration file. Its log is redis.log,
// where process.logTail looks.
func (g *Sentinels) sentinelConf(p *process, primaryPort string) string {
	lines := []string{
		"port " + strconv.Itoa(p.port),
		"bind 127.0.0.1",
		"daemonize no",
		"dir " + p.dir,
		"logfile " + filepath.Join(p.dir, "redis.log"),
		"sentinel resolve-hostnames no",
		fmt.Sprintf("sentinel monitor %s 127.0.0.1 %s %d", sentinelMasterName, primaryPort, sentinelQuorum),
		fmt.Sprintf("sentinel down-after-milliseconds %s %d", sentinelMasterName, g.cfg.downAfter.Milliseconds()),
		fmt.Sprintf("sentinel failover-timeout %s %d", sentinelMasterName, failoverTimeout.Milliseconds()),
		fmt.Sprintf("sentinel parallel-syncs %s 1", sentinelMasterName),
	}
	return strings.Join(lines, "\n") + "\n"
}

// waitSentinelsReady waits until every sentinel names master, knows the
// two other sentinels and every replica, each connected and in sync as
// far as its last INFO tells: SENTINEL FAILOVER picks only such replicas
// (NOGOODSLAVE otherwise), and a failover after a Kill needs the others'
// votes.
func (g *Sentinels) waitSentinelsReady(ctx context.Context, master string) error {
	return pollUntil(ctx, "sentinels do not know the group", func(ctx context.Context) error {
		for i, sc := range g.probes {
			if err := sentinelKnows(ctx, sc, master, sentinelCount-1, g.cfg.replicas); err != nil {
				return fmt.Errorf("sentinel %d: %w", i, err)
			}
		}
		return nil
	})
}

// sentinelKnows checks one sentinel's view of the group.
func sentinelKnows(ctx context.Context, sc *redis.SentinelClient, master string, peers, replicas int) error {
	got, err := sc.GetMasterAddrByName(ctx, sentinelMasterName).Result()
	if err != nil {
		return err
	}
	if addr := net.JoinHostPort(got[0], got[1]); addr != master {
		return fmt.Errorf("names master %s, not %s", addr, master)
	}
	others, err := sc.Sentinels(ctx, sentinelMasterName).Result()
	if err != nil {
		return err
	}
	if n := countFlags(others, "sentinel", nil); n != peers {
		return fmt.Errorf("knows %d sentinels up, not %d", n, peers)
	}
	reps, err := sc.Replicas(ctx, sentinelMasterName).Result()
	if err != nil {
		return err
	}
	linkUp := func(m map[string]string) bool { return m["master-link-status"] == "ok" }
	if n := countFlags(reps, "slave", linkUp); n != replicas {
		return fmt.Errorf("knows %d replicas up and linked, not %d", n, replicas)
	}
	return nil
}

// countFlags counts the instances whose flags are exactly flags (no
// s_down, no disconnected) and that pass ok, if given.
func countFlags(instances []map[string]string, flags string, ok func(map[string]string) bool) int {
	n := 0
	for _, m := range instances {
		if m["flags"] == flags && (ok == nil || ok(m)) {
			n++
		}
	}
	return n
}

// MasterName returns the name the sentinels monitor the primary by.
func (g *Sentinels) MasterName() string { return sentinelMasterName }

// SentinelAddrs returns the three sentinels' host:port addresses.
func (g *Sentinels) SentinelAddrs() []string { return slices.Clone(g.addrs) }

// Servers returns the data nodes: index 0 is the first primary, the
// others its first replicas. Which is master now is the sentinels' word:
// ask Primary.
func (g *Sentinels) Servers() []*Server { return slices.Clone(g.servers) }

// Primary returns the server a majority of the sentinels name as master
// now, waiting (until ctx ends) while they disagree, as they do for about
// two seconds after a failover. Right after a Kill it is still the killed
// server: the sentinels have not noticed yet.
func (g *Sentinels) Primary(ctx context.Context) (*Server, error) {
	var s *Server
	err := pollUntil(ctx, "no master named by a majority of sentinels", func(ctx context.Context) (err error) {
		s, err = g.named(ctx)
		return err
	})
	return s, err
}

// Replicas returns the data nodes other than Primary, in Servers' order,
// whether they run or not.
func (g *Sentinels) Replicas(ctx context.Context) ([]*Server, error) {
	p, err := g.Primary(ctx)
	if err != nil {
		return nil, err
	}
	return slices.DeleteFunc(g.Servers(), func(s *Server) bool { return s == p }), nil
}

// named asks every sentinel which server is master and returns the one a
// majority names.
func (g *Sentinels) named(ctx context.Context) (*Server, error) {
	votes := map[string]int{}
	var errs []error
	for i, sc := range g.probes {
		got, err := sc.GetMasterAddrByName(ctx, sentinelMasterName).Result()
		if err != nil {
			errs = append(errs, fmt.Errorf("sentinel %d: %w", i, err))
			continue
		}
		votes[net.JoinHostPort(got[0], got[1])]++
	}
	for addr, n := range votes {
		if n > len(g.probes)/2 {
			return g.server(addr)
		}
	}
	return nil, errors.Join(append(errs, fmt.Errorf("sentinels name %v", votes))...)
}

// server returns the data node listening on addr.
func (g *Sentinels) server(addr string) (*Server, error) {
	for _, s := range g.servers {
		if s.Addr() == addr {
			return s, nil
		}
	}
	return nil, fmt.Errorf("sentinels name %s, none of the group's servers", addr)
}

// NewFailoverClient returns a go-redis failover client of the group: it
// asks the sentinels for the master and follows it through failovers.
// opts may change its options (MasterName and SentinelAddrs are set
// first). Close closes it; closing it earlier is fine.
func (g *Sentinels) NewFailoverClient(opts ...func(*redis.FailoverOptions)) *redis.Client {
	o := &redis.FailoverOptions{MasterName: sentinelMasterName, SentinelAddrs: g.SentinelAddrs()}
	for _, f := range opts {
		f(o)
	}
	c := redis.NewFailoverClient(o)
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.closed {
		_ = c.Close()
	} else {
		g.clients = append(g.clients, c)
	}
	return c
}

// Failover asks a sentinel for a planned failover (SENTINEL FAILOVER) and
// waits until a majority of the sentinels name a new master and it
// answers ROLE as master; it returns that server, about a second later.
// It asks only once every sentinel names the same master, so that no
// sentinel with a stale view fails over a former master; while no
// replica can be promoted yet (NOGOODSLAVE) or a failover runs (INPROG),
// it asks again, until ctx ends. Should the master move meanwhile (a
// failover after a Kill was under way), it returns the new one without
// asking.
//
// The former master stays a master until Sentinel reconfigures it, about
// 10 s later. Call WaitReplicasSynced, which waits for that, before
// another Failover: Sentinel may otherwise promote the former master
// again, which never replicated the new master's writes, and they are
// lost.
func (g *Sentinels) Failover(ctx context.Context) (*Server, error) {
	old, err := g.Primary(ctx)
	if err != nil {
		return nil, err
	}
	err = pollUntil(ctx, "SENTINEL FAILOVER", func(ctx context.Context) error {
		if now, err := g.named(ctx); err != nil || now != old {
			return err // nil once the master has moved
		}
		if err := g.allName(ctx, old); err != nil {
			return err
		}
		// An error other than these two may come after the sentinel
		// started a failover: asking again could start a second one.
		err := g.probes[0].Failover(ctx, sentinelMasterName).Err()
		if err != nil && !retryableFailover(err) {
			return stopPolling{err}
		}
		return err
	})
	if err != nil {
		return nil, err
	}
	return g.WaitMaster(ctx, old)
}

// allName checks that every sentinel names s as master.
func (g *Sentinels) allName(ctx context.Context, s *Server) error {
	for i, sc := range g.probes {
		got, err := sc.GetMasterAddrByName(ctx, sentinelMasterName).Result()
		if err != nil {
			return fmt.Errorf("sentinel %d: %w", i, err)
		}
		if addr := net.JoinHostPort(got[0], got[1]); addr != s.Addr() {
			return fmt.Errorf("sentinel %d names %s, the others %s", i, addr, s.Addr())
		}
	}
	return nil
}

// retryableFailover reports whether a sentinel's error reply to SENTINEL
// FAILOVER may turn into OK later.
func retryableFailover(err error) bool {
	msg := err.Error()
	return strings.Contains(msg, "NOGOODSLAVE") || strings.Contains(msg, "INPROG")
}

// WaitMaster waits until a majority of the sentinels name a master other
// than not (any master when not is nil) and that server answers ROLE as
// master, and returns it. After a Kill of the primary it is the wait for
// the automatic failover:
//
//	old, _ := g.Primary(ctx)
//	_ = old.Kill()
//	newMaster, err := g.WaitMaster(ctx, old)
//
// which takes about WithDownAfter plus 1.5 s, several seconds more
// (failover-timeout twice) in a round where the sentinels split their
// votes.
func (g *Sentinels) WaitMaster(ctx context.Context, not *Server) (*Server, error) {
	var s *Server
	err := pollUntil(ctx, "no new master", func(ctx context.Context) (err error) {
		if s, err = g.named(ctx); err != nil {
			return err
		}
		if s == not {
			return fmt.Errorf("sentinels still name %s", s.Addr())
		}
		return isMaster(ctx, s)
	})
	return s, err
}

// isMaster checks that s answers ROLE as master.
func isMaster(ctx context.Context, s *Server) error {
	role, err := s.Client().Do(ctx, "ROLE").Slice()
	if err != nil {
		return fmt.Errorf("ROLE of %s: %w", s.Addr(), err)
	}
	if len(role) == 0 || role[0] != "master" {
		return fmt.Errorf("%s answers ROLE %v", s.Addr(), role)
	}
	return nil
}

// WaitReplicasSynced waits until every running data node but the master
// the sentinels name replicates that master with its link up
// (master_link_status:up) and has processed all the master had when
// asked (its slave_repl_offset at least the master's master_repl_offset,
// read just before: the sentinels' hello messages move it on every
// second or so). A former master that runs again counts: the wait lasts
// until Sentinel has made it a replica, about 10 s after it came back.
// Killed and stopped nodes are left out; a frozen one holds the wait up.
func (g *Sentinels) WaitReplicasSynced(ctx context.Context) error {
	return pollUntil(ctx, "replicas not in sync", func(ctx context.Context) error {
		master, err := g.named(ctx)
		if err != nil {
			return err
		}
		others := slices.DeleteFunc(g.Servers(), func(s *Server) bool { return s == master })
		return synced(ctx, master, others)
	})
}

// waitSynced waits until every running server of replicas is in sync
// with master (see WaitReplicasSynced).
func waitSynced(ctx context.Context, master *Server, replicas []*Server) error {
	return pollUntil(ctx, "replicas not in sync", func(ctx context.Context) error {
		return synced(ctx, master, replicas)
	})
}

// synced checks once what waitSynced waits for.
func synced(ctx context.Context, master *Server, replicas []*Server) error {
	m, err := replicationInfo(ctx, master)
	if err != nil {
		return err
	}
	if m["role"] != "master" {
		return fmt.Errorf("master %s reports role:%s", master.Addr(), m["role"])
	}
	offset, _ := strconv.ParseInt(m["master_repl_offset"], 10, 64)
	for _, r := range replicas {
		if !r.isRunning() {
			continue
		}
		if err := replicaSynced(ctx, r, master.Addr(), offset); err != nil {
			return err
		}
	}
	return nil
}

// replicaSynced checks that r replicates master, link up, and has
// processed at least offset.
func replicaSynced(ctx context.Context, r *Server, master string, offset int64) error {
	info, err := replicationInfo(ctx, r)
	if err != nil {
		return err
	}
	if info["role"] != "slave" {
		return fmt.Errorf("%s reports role:%s", r.Addr(), info["role"])
	}
	if of := net.JoinHostPort(info["master_host"], info["master_port"]); of != master {
		return fmt.Errorf("%s replicates %s, not %s", r.Addr(), of, master)
	}
	if info["master_link_status"] != "up" {
		return fmt.Errorf("%s: master_link_status:%s", r.Addr(), info["master_link_status"])
	}
	got, _ := strconv.ParseInt(info["slave_repl_offset"], 10, 64)
	if got < offset {
		return fmt.Errorf("%s at offset %d, master at %d", r.Addr(), got, offset)
	}
	return nil
}

// replicationInfo returns s's INFO replication fields.
func replicationInfo(ctx context.Context, s *Server) (map[string]string, error) {
	text, err := s.Client().Info(ctx, "replication").Result()
	if err != nil {
		return nil, fmt.Errorf("INFO replication of %s: %w", s.Addr(), err)
	}
	out := map[string]string{}
	for _, line := range strings.Split(text, "\n") {
		if k, v, ok := strings.Cut(strings.TrimSpace(line), ":"); ok {
			out[k] = v
		}
	}
	return out, nil
}

// isRunning reports whether s runs: started and not killed, stopped or
// closed since.
func (s *Server) isRunning() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.running && !s.closed
}

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

// stopPolling makes pollUntil give up at once with the error it wraps.
type stopPolling struct{ error }

func (e stopPolling) Unwrap() error { return e.error }

// pollUntil calls check every sentinelPollEvery, each call bounded by
// sentinelCallTimeout, until it returns nil, returns a stopPolling or ctx
// ends; the error then says what and carries check's last error.
func pollUntil(ctx context.Context, what string, check func(context.Context) error) error {
	for {
		cctx, cancel := context.WithTimeout(ctx, sentinelCallTimeout)
		err := check(cctx)
		cancel()
		var stop stopPolling
		switch {
		case err == nil:
			return nil
		case errors.As(err, &stop):
			return fmt.Errorf("redistest: %s: %w", what, stop.error)
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("redistest: %s: %w; last: %v", what, ctx.Err(), err)
		case <-time.After(sentinelPollEvery):
		}
	}
}
