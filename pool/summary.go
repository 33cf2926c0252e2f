package pool

import (
	"context"
	"fmt"
	"sort"

	"github.com/redis/go-redis/v9"
)

// summaryExactJobs is the most jobs of a pool Summary reads exactly
// (every record, as Inspect): 5-11 ms of reading, measured.
const summaryExactJobs = 2000

// Summary returns a snapshot of the pool poolName for views (the
// dashboard, shepherd status): what Inspect returns, read without the
// job records once the pool holds more than 2,000 jobs. It costs
// one pipelined round trip of O(nodes + workers) reads (HLEN for the jobs,
// the workers' reports for what they run; Stats.Sampled tells), and one
// HMGET of a few records when a worker is unhealthy, whatever the pool's
// size: 0.6 ms at a million jobs, where Inspect reads every record for
// 10 s. A small pool is read as Inspect reads it, in two
// round trips. Health is judged as Inspect judges it; a pool Redis holds
// nothing of is no error (Stats.Exists is false). It returns an error
// wrapping ErrInvalidOption for a nil client or an invalid name.
func Summary(ctx context.Context, rdb redis.UniversalClient, poolName string) (*Stats, error) {
	lay, err := poolLayout(rdb, poolName)
	if err != nil {
		return nil, err
	}
	lays, err := shardLayouts(ctx, rdb, poolName, lay)
	if err != nil {
		return nil, fmt.Errorf("pool: summary of %q: %w", poolName, err)
	}
	return readEachShard(ctx, rdb, poolName, lays, summary)
}

// Summary returns a snapshot of the node's pool as the package's Summary
// reads it: cheap whatever the pool's size. It is safe for concurrent
// use.
func (n *Node) Summary(ctx context.Context) (*Stats, error) {
	if err := n.errClosed(); err != nil {
		return nil, err
	}
	return readEachShard(ctx, n.rdb, n.name, n.layouts(), summary)
}

// summary reads a summary of one pool's layout (a shard's, once the pool
// shards): from the reports, or exactly when it is small.
func summary(ctx context.Context, rdb redis.UniversalClient, poolName string, lay layout) (*Stats, error) {
	st, err := readPool(ctx, rdb, poolName, lay, false)
	if err != nil || st.Jobs > summaryExactJobs {
		return st, err
	}
	return inspect(ctx, rdb, poolName, lay)
}

// countReports fills the job figures of st from the workers' reports in
// alive, and samples the orphans: the reported keys of the unhealthy
// workers that their records still name (one HMGET).
func countReports(ctx context.Context, rdb redis.UniversalClient, lay layout, st *Stats, alive map[string]string, healthy map[string]bool) error {
	var suspects []string
	owner := map[string]string{}
	for i := range st.Workers {
		ws := &st.Workers[i]
		rep, _ := parseReport(alive[reportField(ws.ID)])
		ws.Jobs, ws.Keys = rep.Jobs, append(ws.Keys, rep.Keys...)
		st.Running += rep.Jobs
		if !healthy[ws.ID] {
			st.OrphanJobs += rep.Jobs
			for _, k := range rep.Keys {
				suspects = append(suspects, k)
				owner[k] = ws.ID
			}
		}
	}
	if len(suspects) == 0 {
		return nil
	}
	raws, err := rdb.HMGet(ctx, lay.jobs, suspects...).Result()
	if err != nil {
		return err
	}
	for i, v := range raws {
		raw, ok := v.(string)
		if !ok {
			continue // stopped or moved since
		}
		if r, err := parseRecord(raw); err == nil && r.Worker == owner[suspects[i]] && r.State != stateQueued {
			st.Orphans = append(st.Orphans, suspects[i])
		}
	}
	sort.Strings(st.Orphans)
	return nil
}

// countRecords fills the job figures of st from every job record.
func countRecords(st *Stats, records map[string]string, healthy map[string]bool) error {
	keysOf := map[string][]string{}
	for key, raw := range records {
		r, err := parseRecord(raw)
		if err != nil {
			return fmt.Errorf("job %q: %w", key, err)
		}
		if r.State == stateRunning {
			st.Running++
		}
		if r.State == stateQueued || r.Worker == "" {
			continue
		}
		keysOf[r.Worker] = append(keysOf[r.Worker], key)
		if !healthy[r.Worker] {
			st.Orphans = append(st.Orphans, key)
		}
	}
	sort.Strings(st.Orphans)
	st.OrphanJobs = len(st.Orphans)
	for i := range st.Workers {
		ws := &st.Workers[i]
		ws.Keys = append(ws.Keys, keysOf[ws.ID]...)
		sort.Strings(ws.Keys)
		ws.Jobs = len(ws.Keys)
	}
	return nil
}
