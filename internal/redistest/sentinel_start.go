package redistest

import (
	"context"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/redis/go-redis/v9/maintnotifications"
)

// How NewSentinels starts a group: the data nodes, then the three
// sentinels, then a wait until every sentinel knows its peers and the
// replicas.

// disklessArgs make a full sync start at once, without an RDB file on the
// master's disk. Every data node gets them: any may become the master.
var disklessArgs = []string{"--repl-diskless-sync", "yes", "--repl-diskless-sync-delay", "0"}

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
	if err := waitReady(ctx, p.addr(), "", nil, p.exited, p.pid()); err != nil {
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
