package redistest

import (
	"context"
	"fmt"
	"net"
	"strings"
	"time"
)

// Kinds of failover that Fault causes.
const (
	// FaultKill kills the primary (SIGKILL); its replica is promoted.
	FaultKill = "kill"
	// FaultPlanned asks for a planned failover (SENTINEL FAILOVER): the
	// old primary keeps accepting writes until Sentinel demotes it.
	FaultPlanned = "planned"
	// FaultCommand sends FAILOVER to the primary (Redis 6.2+): it stops
	// writes, waits until its replica has every one, and swaps roles with
	// it; nothing is lost. The sentinels name the new master only about
	// 30 s later: meanwhile a Sentinel client still sends its commands to
	// the old primary, now a replica, which refuses writes (READONLY).
	FaultCommand = "command"
	// FaultBehind freezes the replica, writes 16 MiB to the primary so
	// that the replica's socket buffers fill and the writes that follow
	// stay on the primary alone for 700 ms, then kills the primary and
	// thaws the replica, which is promoted without them.
	FaultBehind = "behind"
)

// Fault fails the group's primary over as kind says (FaultKill,
// FaultPlanned, FaultCommand, FaultBehind) and returns the old primary and the new one,
// once a majority of the sentinels name it and it answers as master. A
// killed primary stays down: Rejoin brings it back as a replica.
func (g *Sentinels) Fault(ctx context.Context, kind string) (old, now *Server, err error) {
	if old, err = g.Primary(ctx); err != nil {
		return nil, nil, err
	}
	switch kind {
	case FaultKill:
		if err := old.Kill(); err != nil {
			return old, nil, err
		}
		now, err = g.WaitMaster(ctx, old)
	case FaultPlanned:
		now, err = g.Failover(ctx)
	case FaultCommand:
		if err := old.Client().Do(ctx, "FAILOVER").Err(); err != nil {
			return old, nil, err
		}
		now, err = g.WaitMaster(ctx, old)
	case FaultBehind:
		rs, err := g.Replicas(ctx)
		if err != nil || len(rs) == 0 {
			return old, nil, fmt.Errorf("redistest: no replica to leave behind: %v", err)
		}
		if err := rs[0].Freeze(); err != nil {
			return old, nil, err
		}
		junk := strings.Repeat("x", 1<<20)
		for i := range 16 {
			if err := old.Client().Set(ctx, fmt.Sprintf("redistest:junk:%d", i), junk, time.Hour).Err(); err != nil {
				_ = rs[0].Thaw()
				return old, nil, err
			}
		}
		time.Sleep(700 * time.Millisecond) // writes go on that the replica never gets
		if err := old.Kill(); err != nil {
			_ = rs[0].Thaw()
			return old, nil, err
		}
		if err := rs[0].Thaw(); err != nil {
			return old, nil, err
		}
		now, err = g.WaitMaster(ctx, old)
	default:
		return old, nil, fmt.Errorf("redistest: unknown kind of failover %q", kind)
	}
	return old, now, err
}

// Rejoin restarts old, a data node that Fault or Kill took down, as a
// replica of the master the sentinels name now, as a node restarted from
// the configuration Sentinel rewrites would come back (and for later
// restarts too: it stays a replica of that master). Restarted as it was
// (Restart), a former primary without persistence comes back an empty
// master, and until Sentinel turns it into a replica, about 10 s later,
// a second failover may promote it and wipe the data of every other
// node: on a loaded machine the new master can miss its down-after, and
// Sentinel picks a replica that reports itself as a master. Redis's
// documentation warns against restarting a master without persistence
// for this reason. It returns once old runs; WaitReplicasSynced waits
// for its sync.
func (g *Sentinels) Rejoin(ctx context.Context, old *Server) error {
	m, err := g.named(ctx)
	if err != nil {
		return err
	}
	if m == old {
		return fmt.Errorf("redistest: the sentinels still name %s: nothing to rejoin", old.Addr())
	}
	host, port, err := net.SplitHostPort(m.Addr())
	if err != nil {
		return err
	}
	return old.RestartWith("--replicaof", host, port)
}
