package main

import (
	"context"
	"fmt"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/shepherd-go/shepherd/internal/rediscluster"
	"github.com/shepherd-go/shepherd/pool"
)

// psShards are the shard counts PS measures by default, in order.
var psShards = []int{1, clusterMasters}

// scenarioPoolShards is PS: scenario A's shape (2 nodes × 4 workers, a
// client-only node, 64 producers dispatching 20,000 distinct keys of 64
// bytes, handlers that return at once) on a private 3-master Redis
// Cluster, once per shard count of -shards (1 and 3 by default): one
// result per shard count, with A's figures and how the pool spread over
// the masters:
//
//   - max_master_job_share: the largest fraction of the jobs held on one
//     master at the end (each shard's jobs hash counted on its master): 1
//     with one shard, about 1/3 with three on three masters;
//   - redis_cpu_us_per_job: the masters' CPU (used_cpu_user + sys) over
//     the dispatches, summed, per job;
//   - busiest_master_cpu_us_per_job: the busiest master's alone;
//   - script_calls_per_job: the script calls (EVALSHA and the like, INFO
//     commandstats) of every master over the dispatches, per job;
//   - busiest_master_vs_first: that figure over the first shard count's
//     in the same run (the bound: ≤ 0.4 at 3 shards against 1);
//   - shard_masters: how many masters the shards' hash tags land on. The
//     pool's name is chosen so that it is min(shards, 3).
//
// The cluster (redis-server processes on free ports, joined with
// redis-cli --cluster create) is started for the run and removed after
// it; the bench's own Redis is not used.
func scenarioPoolShards(ctx context.Context, b *bench, _ int) (result, error) {
	counts := b.cfg.shards
	if len(counts) == 0 {
		counts = psShards
	}
	cl, err := rediscluster.Start(ctx, clusterMasters, rediscluster.WithArgs("--maxclients", "10000"))
	if err != nil {
		return newResult(), fmt.Errorf("redis cluster: %w", err)
	}
	defer cl.Close()
	var out []result
	for _, shards := range counts {
		r, err := b.poolShardsRun(ctx, cl, shards)
		if err != nil {
			return newResult(), fmt.Errorf("%d shards: %w", shards, err)
		}
		if len(out) > 0 && out[0].Metrics["busiest_master_cpu_us_per_job"] > 0 {
			r.set("busiest_master_vs_first", r.Metrics["busiest_master_cpu_us_per_job"]/out[0].Metrics["busiest_master_cpu_us_per_job"])
		}
		out = append(out, r)
	}
	first := out[0]
	first.more = out[1:]
	return first, nil
}

// poolShardsRun is one of PS's measurements: scenario A on cl with a pool
// of shards shards.
func (b *bench) poolShardsRun(ctx context.Context, cl *rediscluster.Cluster, shards int) (result, error) {
	r := newResult()
	r.Variant = fmt.Sprintf("shards=%d", shards)
	jobs := b.scaled(20000, 100)
	name, masters, err := spreadTags(ctx, cl, shards, func() string { return benchPoolName("ps") }, "pool")
	if err != nil {
		return r, err
	}
	p, err := newPoolOn(ctx, name, 2, 4, func(size int) redis.UniversalClient { return cl.NewClient(size) },
		pool.WithShards(shards))
	if err != nil {
		return r, err
	}
	defer p.close(ctx)
	before, err := readMasters(ctx, cl)
	if err != nil {
		return r, err
	}
	st := dispatch(ctx, p.client, 0, jobs, 64)
	after, err := readMasters(ctx, cl)
	if err != nil {
		return r, err
	}
	if st.err != nil {
		fmt.Fprintf(b.stderr, "scenario PS: %d dispatch errors, first: %v\n", st.errors, st.err)
	}
	done := jobs - st.errors
	if err := p.log.waitFor(ctx, 30*time.Second, func() bool { return len(p.log.first) >= done }); err != nil {
		return r, fmt.Errorf("waiting for starts: %w", err)
	}
	share, err := maxMasterJobShare(ctx, cl, name, shards)
	if err != nil {
		return r, err
	}
	var cpu, busiest, calls float64
	for i := range after {
		d := after[i].cpu - before[i].cpu
		cpu += d
		busiest = max(busiest, d)
		calls += after[i].calls - before[i].calls
	}
	r.set("shards", float64(shards))
	r.set("shard_masters", float64(masters))
	r.set("jobs", float64(jobs))
	r.set("jobs_per_s", float64(done)/st.elapsed.Seconds())
	r.setMs("dispatch_p50_ms", st.lat.pct(50))
	r.setMs("dispatch_p99_ms", st.lat.pct(99))
	r.set("errors", float64(st.errors))
	r.set("duplicate_starts", float64(p.log.duplicates()))
	r.set("max_master_job_share", share)
	if done > 0 {
		r.set("redis_cpu_us_per_job", cpu*1e6/float64(done))
		r.set("busiest_master_cpu_us_per_job", busiest*1e6/float64(done))
		r.set("script_calls_per_job", calls/float64(done))
	}
	if _, err := p.shutdown(ctx); err != nil {
		return r, fmt.Errorf("shutdown: %w", err)
	}
	return r, nil
}

// maxMasterJobShare returns the largest fraction of the pool's jobs that
// one master holds: each shard's jobs hash, counted on the master that
// serves its slot.
func maxMasterJobShare(ctx context.Context, cl *rediscluster.Cluster, name string, shards int) (float64, error) {
	perMaster := map[int]int64{}
	var total int64
	for i := range shards {
		key := "shepherd:{" + shardTag(name, i) + "}:pool:jobs"
		node, err := cl.NodeOf(ctx, key)
		if err != nil {
			return 0, err
		}
		n, err := cl.Client().HLen(ctx, key).Result()
		if err != nil {
			return 0, fmt.Errorf("jobs of shard %d: %w", i, err)
		}
		perMaster[node] += n
		total += n
	}
	if total == 0 {
		return 0, fmt.Errorf("no job recorded in the pool's %d shards", shards)
	}
	var most int64
	for _, n := range perMaster {
		most = max(most, n)
	}
	return float64(most) / float64(total), nil
}
