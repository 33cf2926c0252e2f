package redistest

import (
	"context"
	"errors"
	"fmt"
	"net"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"
)

// Who is master: the sentinels' answer (Primary, Replicas), a failover
// asked for and waited out (Failover, WaitMaster), the replicas' sync
// (WaitReplicasSynced), and the poll they share (pollUntil).

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
	return infoFields(ctx, s.Client(), s.Addr(), "replication")
}

// infoFields returns the fields of INFO section of the server c reaches
// (at addr, for the error).
func infoFields(ctx context.Context, c redis.UniversalClient, addr, section string) (map[string]string, error) {
	text, err := c.Info(ctx, section).Result()
	if err != nil {
		return nil, fmt.Errorf("INFO %s of %s: %w", section, addr, err)
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
