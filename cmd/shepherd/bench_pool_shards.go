package main

import (
	"context"
	"fmt"
	"slices"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/shepherd-go/shepherd/internal/keys"
	"github.com/shepherd-go/shepherd/internal/rediscluster"
	"github.com/shepherd-go/shepherd/pool"
)

// psShards are the shard counts PS measures by default, in order.
var psShards = []int{1, clusterMasters}

// scenarioPoolShards is PS: scenario A's shape (2 nodes × 4 workers, a
// client-only node, 64 producers a shard dispatching 20,000 distinct keys
// of 64 bytes, handlers that return at once) on a private 3-master Redis
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
// it. When a shard count is above 1, every count then runs again on the
// bench's own standalone Redis (variant "shards=N standalone", with
// "standalone": 1, and no master fields): the cost of sharding itself,
// in redis_cpu_us_per_job and script_calls_per_job, apart from the
// cluster and the cores its three masters share on the machine.
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
	// The same shard counts on one standalone Redis (the bench's), when
	// one of them shards: what sharding itself costs, apart from the
	// cluster and the cores its masters share.
	if slices.ContainsFunc(counts, func(n int) bool { return n > 1 }) {
		for _, shards := range counts {
			r, err := b.poolShardsStandalone(ctx, shards)
			if err != nil {
				return newResult(), fmt.Errorf("%d shards on one Redis: %w", shards, err)
			}
			out = append(out, r)
		}
	}
	first := out[0]
	first.more = out[1:]
	return first, nil
}

// poolShardsRun is one of PS's measurements: scenario A on cl with a pool
// of shards shards.
func (b *bench) poolShardsRun(ctx context.Context, cl *rediscluster.Cluster, shards int) (result, error) {
	name, masters, err := spreadTags(ctx, cl, shards, func() string { return benchPoolName("ps") }, "pool")
	if err != nil {
		return newResult(), err
	}
	r, err := b.poolShardsOn(ctx, name, shards, func(size int) redis.UniversalClient { return cl.NewClient(size) },
		func(ctx context.Context) ([]masterStats, error) { return readMasters(ctx, cl) },
		func(ctx context.Context) (float64, error) { return maxMasterJobShare(ctx, cl, name, shards) })
	r.Variant = fmt.Sprintf("shards=%d", shards)
	r.set("shard_masters", float64(masters))
	return r, err
}

// poolShardsStandalone is PS's line of shards shards on the bench's own
// standalone Redis: its redis_cpu_us_per_job and script_calls_per_job,
// beside A's (one shard on the same Redis), are what sharding itself
// costs, apart from the cluster and the cores its masters share.
func (b *bench) poolShardsStandalone(ctx context.Context, shards int) (result, error) {
	r, err := b.poolShardsOn(ctx, benchPoolName("ps"), shards, func(size int) redis.UniversalClient { return b.client(size) },
		func(ctx context.Context) ([]masterStats, error) {
			info, err := b.rdb.Info(ctx, "cpu", "commandstats").Result()
			if err != nil {
				return nil, err
			}
			s, err := parseMasterStats(info)
			return []masterStats{s}, err
		}, nil)
	r.Variant = fmt.Sprintf("shards=%d standalone", shards)
	r.set("standalone", 1)
	return r, err
}

// poolShardsOn runs scenario A's shape on a pool of shards shards named
// name, on the clients newClient makes, reading the masters' counters
// with read before and after the dispatches, and the busiest master's
// share of the jobs with share (nil: none, on one Redis).
func (b *bench) poolShardsOn(ctx context.Context, name string, shards int, newClient func(int) redis.UniversalClient,
	read func(context.Context) ([]masterStats, error), share func(context.Context) (float64, error)) (result, error) {
	r := newResult()
	jobs := b.scaled(20000, 100)
	p, err := newPoolOn(ctx, name, 2, 4, newClient, pool.WithShards(shards))
	if err != nil {
		return r, err
	}
	defer p.close(ctx)
	before, err := read(ctx)
	if err != nil {
		return r, err
	}
	// 64 producers a shard: each shard is offered what one shard is. With
	// 64 in all, each shard's batches (admissions, claims, starts) were a
	// third as large, and the script calls per job doubled (1.0 -> 2.1):
	// a master then pays more per job because it is less busy, which says
	// nothing of what it admits when pushed.
	st := dispatch(ctx, p.client, 0, jobs, 64*shards)
	after, err := read(ctx)
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
	if share != nil {
		s, err := share(ctx)
		if err != nil {
			return r, err
		}
		r.set("max_master_job_share", s)
	}
	var cpu, busiest, calls float64
	for i := range after {
		d := after[i].cpu - before[i].cpu
		cpu += d
		busiest = max(busiest, d)
		calls += after[i].calls - before[i].calls
	}
	r.set("shards", float64(shards))
	r.set("jobs", float64(jobs))
	r.set("jobs_per_s", float64(done)/st.elapsed.Seconds())
	r.setMs("dispatch_p50_ms", st.lat.pct(50))
	r.setMs("dispatch_p99_ms", st.lat.pct(99))
	r.set("errors", float64(st.errors))
	r.set("duplicate_starts", float64(p.log.duplicates()))
	if done > 0 {
		r.set("redis_cpu_us_per_job", cpu*1e6/float64(done))
		r.set("script_calls_per_job", calls/float64(done))
		if share != nil {
			r.set("busiest_master_cpu_us_per_job", busiest*1e6/float64(done))
		}
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
		key := "shepherd:{" + keys.ShardTag(name, i) + "}:pool:jobs"
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
