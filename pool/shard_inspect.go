package pool

import (
	"context"
	"slices"
	"sort"
	"time"

	"github.com/redis/go-redis/v9"
)

// inspectShards reads every shard of a pool (lays[i] is shard i's
// layout) exactly and adds them up into one snapshot (mergeStats).
func inspectShards(ctx context.Context, rdb redis.UniversalClient, name string, lays []layout) (*Stats, error) {
	return readEachShard(ctx, rdb, name, lays, inspect)
}

// readEachShard reads every shard of a pool with read (inspect or summary)
// and adds them up (mergeStats).
func readEachShard(ctx context.Context, rdb redis.UniversalClient, name string, lays []layout,
	read func(context.Context, redis.UniversalClient, string, layout) (*Stats, error)) (*Stats, error) {
	parts := make([]*Stats, len(lays))
	for i, l := range lays {
		st, err := read(ctx, rdb, name, l)
		if err != nil {
			return nil, err
		}
		parts[i] = st
	}
	st := parts[0]
	if len(parts) > 1 {
		st = mergeStats(parts)
	}
	st.Shards = len(lays)
	return st, nil
}

// layouts returns the layouts of the shards of the node's pool.
func (n *Node) layouts() []layout {
	parts := n.partsOrSelf()
	out := make([]layout, len(parts))
	for i, p := range parts {
		out[i] = p.lay
	}
	return out
}

// mergeStats adds up the snapshots of a pool's shards (parts[0] is shard
// 0's). A node or a worker, which is in every shard, is listed once:
// healthy when it is in every shard it is listed in, seen when its
// stalest part was, with the jobs of all its parts. The settings, the
// recoveries, the schedules and the tickers are shard 0's (the
// recoveries of the others follow, newest first, up to the same bound);
// the counts add up.
func mergeStats(parts []*Stats) *Stats {
	st := *parts[0]
	st.Nodes = mergeNodes(parts)
	st.Workers = mergeWorkers(parts)
	st.WorkersBusy, st.WorkersIdle = 0, 0
	for _, w := range st.Workers {
		if w.Jobs > 0 {
			st.WorkersBusy++
		} else {
			st.WorkersIdle++
		}
	}
	st.Orphans = slices.Clone(st.Orphans)
	st.Recoveries = slices.Clone(st.Recoveries)
	for _, p := range parts[1:] {
		st.Exists = st.Exists || p.Exists
		st.Jobs += p.Jobs
		st.Running += p.Running
		st.QueueDepth += p.QueueDepth
		st.Pending += p.Pending
		st.OldestPending = max(st.OldestPending, p.OldestPending)
		st.Orphans = append(st.Orphans, p.Orphans...)
		st.OrphanJobs += p.OrphanJobs
		st.Sampled = st.Sampled || p.Sampled
		st.Started += p.Started
		st.StartsFailed += p.StartsFailed
		st.Recovered += p.Recovered
		st.Recoveries = append(st.Recoveries, p.Recoveries...)
	}
	sort.Strings(st.Orphans)
	sort.SliceStable(st.Recoveries, func(i, j int) bool { return st.Recoveries[i].Time.After(st.Recoveries[j].Time) })
	if len(st.Recoveries) > maxRecoveries {
		st.Recoveries = st.Recoveries[:maxRecoveries]
	}
	return &st
}

// mergeNodes lists each node of the shards once (see mergeStats).
func mergeNodes(parts []*Stats) []NodeStats {
	byID := map[string]*NodeStats{}
	var order []string
	for _, p := range parts {
		for _, ns := range p.Nodes {
			have, ok := byID[ns.ID]
			if !ok {
				ns := ns
				byID[ns.ID] = &ns
				order = append(order, ns.ID)
				continue
			}
			if have.Host == "" { // shard 0 may have lost the record
				have.Host, have.PID, have.Name, have.Started, have.Client = ns.Host, ns.PID, ns.Name, ns.Started, ns.Client
			}
			have.Healthy = have.Healthy && ns.Healthy
			if stalest(ns.LastSeen, have.LastSeen) {
				have.LastSeen, have.Age = ns.LastSeen, ns.Age
			}
		}
	}
	out := make([]NodeStats, 0, len(order))
	for _, id := range order {
		out = append(out, *byID[id])
	}
	sort.Slice(out, func(i, j int) bool { return out[i].ID < out[j].ID })
	return out
}

// mergeWorkers lists each worker of the shards once (see mergeStats),
// with its slot in shard 0.
func mergeWorkers(parts []*Stats) []WorkerStats {
	byID := map[string]*WorkerStats{}
	var order []string
	for _, p := range parts {
		for _, ws := range p.Workers {
			have, ok := byID[ws.ID]
			if !ok {
				ws := ws
				ws.Keys = slices.Clone(ws.Keys)
				byID[ws.ID] = &ws
				order = append(order, ws.ID)
				continue
			}
			have.Healthy = have.Healthy && ws.Healthy
			if stalest(ws.LastSeen, have.LastSeen) {
				have.LastSeen, have.HealthAge = ws.LastSeen, ws.HealthAge
			}
			if ws.RestartingUntil.After(have.RestartingUntil) {
				have.RestartingUntil = ws.RestartingUntil
			}
			have.Keys = append(have.Keys, ws.Keys...)
			have.Jobs += ws.Jobs
		}
	}
	out := make([]WorkerStats, 0, len(order))
	for _, id := range order {
		ws := byID[id]
		sort.Strings(ws.Keys)
		out = append(out, *ws)
	}
	sort.Slice(out, func(i, j int) bool {
		a, b := out[i], out[j]
		if a.Slot != b.Slot {
			return a.Slot < b.Slot
		}
		return a.ID < b.ID
	})
	return out
}

// stalest reports whether keep-alive a is older than b (a zero time,
// never seen, is the oldest).
func stalest(a, b time.Time) bool {
	return a.IsZero() && !b.IsZero() || !b.IsZero() && a.Before(b)
}
