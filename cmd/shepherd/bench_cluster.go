package main

import (
	"context"
	"errors"
	"fmt"
	"regexp"
	"strconv"

	"github.com/redis/go-redis/v9"

	"github.com/shepherd-go/shepherd/internal/keys"
	"github.com/shepherd-go/shepherd/internal/rediscluster"
	"github.com/shepherd-go/shepherd/queue"
)

// clusterMasters is TS's number of Redis Cluster masters.
const clusterMasters = 3

// tsShards are the shard counts TS measures, in order.
var tsShards = []int{1, clusterMasters}

// scenarioShards is TS: T1's shape (2 processes × 4 workers, 64
// submitters, 20,000 tasks of 64 bytes, a no-op handler) on a private
// 3-master Redis Cluster, once with 1 shard and once with 3
// (queue.WithShards on every handle): one result per shard count. Besides
// T1's figures it records how the work spread over the masters:
//
//   - redis_cpu_us_per_task: the masters' CPU (used_cpu_user + sys) over
//     the run, summed, per task;
//   - busiest_master_cpu_us_per_task: the busiest master's alone;
//   - max_master_task_share: the busiest master's share of the time Redis
//     spent in the queue's scripts (usec of EVALSHA, EVAL and FCALL, and
//     their _RO forms, in INFO commandstats): 1 when one master does all
//     of the work, 1/3 when three share it evenly;
//   - shard_masters: how many masters the shards' hash tags land on. The
//     queue's name is chosen so that with 3 shards it is 3 (a random name
//     puts its 3 tags on 3 different masters only 2 times in 9).
//
// The cluster (redis-server processes on free ports, joined with
// redis-cli --cluster create) is started for the run and removed after it.
// A third result runs the 3 shards on the bench's standalone Redis
// (variant "shards=3 standalone"): its redis_cpu_us_per_task beside
// T1's is what sharding itself costs, apart from the cluster.
func scenarioShards(ctx context.Context, b *bench, _ int) (result, error) {
	cl, err := rediscluster.Start(ctx, clusterMasters, rediscluster.WithArgs("--maxclients", "10000"))
	if err != nil {
		return newResult(), fmt.Errorf("redis cluster: %w", err)
	}
	defer cl.Close()
	var out []result
	for _, shards := range tsShards {
		r, err := b.shardsRun(ctx, cl, shards)
		if err != nil {
			return newResult(), fmt.Errorf("%d shards: %w", shards, err)
		}
		out = append(out, r)
	}
	// The same shards on one standalone Redis (the bench's): what sharding
	// itself costs, apart from the cluster and the cores it shares.
	r, err := b.shardsStandalone(ctx, clusterMasters)
	if err != nil {
		return newResult(), fmt.Errorf("%d shards on one Redis: %w", clusterMasters, err)
	}
	out = append(out, r)
	first := out[0]
	first.more = out[1:]
	return first, nil
}

// shardsStandalone is TS's third line: T1 with shards shards on the
// bench's own standalone Redis, with redis_cpu_us_per_task to compare
// with T1's (one shard on the same Redis).
func (b *bench) shardsStandalone(ctx context.Context, shards int) (result, error) {
	r := newResult()
	r.Variant = fmt.Sprintf("shards=%d standalone", shards)
	tasks := b.scaled(20000, 100)
	bq, err := b.newQueueServing(ctx, "ts", 2, noop, []queue.Option{queue.WithShards(shards)}, queue.WithWorkers(4))
	if err != nil {
		return r, err
	}
	defer bq.close()
	cpu := b.startCPU(ctx)
	run := runThroughput(ctx, bq.submit, tasks)
	cpu.perTask(ctx, r, tasks)
	run.record(b, r, "TS")
	r.set("shards", float64(shards))
	r.set("standalone", 1)
	return r, nil
}

// shardsRun is one of TS's measurements: T1 on cl with shards shards.
func (b *bench) shardsRun(ctx context.Context, cl *rediscluster.Cluster, shards int) (result, error) {
	r := newResult()
	r.Variant = fmt.Sprintf("shards=%d", shards)
	tasks := b.scaled(20000, 100)
	name, masters, err := spreadName(ctx, cl, shards)
	if err != nil {
		return r, err
	}
	newClient := func() redis.UniversalClient { return cl.NewClient(128) }
	bq, err := openBenchQueue(ctx, name, 2, newClient, noop, []queue.Option{queue.WithShards(shards)}, queue.WithWorkers(4))
	if err != nil {
		return r, err
	}
	defer bq.close()
	before, err := readMasters(ctx, cl)
	if err != nil {
		return r, err
	}
	run := runThroughput(ctx, bq.submit, tasks)
	after, err := readMasters(ctx, cl)
	if err != nil {
		return r, err
	}
	run.record(b, r, "TS")
	r.set("shards", float64(shards))
	r.set("shard_masters", float64(masters))
	var cpu, busiestCPU, script, busiestScript float64
	for i := range after {
		dc, ds := after[i].cpu-before[i].cpu, after[i].scriptUsec-before[i].scriptUsec
		cpu += dc
		script += ds
		busiestCPU, busiestScript = max(busiestCPU, dc), max(busiestScript, ds)
	}
	r.set("redis_cpu_us_per_task", cpu*1e6/float64(tasks))
	r.set("busiest_master_cpu_us_per_task", busiestCPU*1e6/float64(tasks))
	if script > 0 {
		r.set("max_master_task_share", busiestScript/script)
	}
	return r, nil
}

// spreadName returns a new queue name whose shards' hash tags ("NAME",
// "NAME#1", ...) land on as many different masters as can be (all of
// them when shards ≥ masters), and that number of masters.
func spreadName(ctx context.Context, cl *rediscluster.Cluster, shards int) (string, int, error) {
	return spreadTags(ctx, cl, shards, func() string { return benchQueueName("ts") }, "queue")
}

// spreadTags returns a new name (from newName) whose shards' hash tags
// land on as many different masters as can be, and that number; kind is
// the unit's kind in its keys ("queue", "pool").
func spreadTags(ctx context.Context, cl *rediscluster.Cluster, shards int, newName func() string, kind string) (string, int, error) {
	want := min(shards, cl.Masters())
	for range 1000 {
		name := newName()
		seen := map[int]bool{}
		for i := range shards {
			n, err := cl.NodeOf(ctx, "shepherd:{"+keys.ShardTag(name, i)+"}:"+kind+":settings")
			if err != nil {
				return "", 0, err
			}
			seen[n] = true
		}
		if len(seen) == want {
			return name, want, nil
		}
	}
	return "", 0, fmt.Errorf("no %s name of 1000 puts %d shards on %d masters", kind, shards, want)
}

// masterStats are the counters TS reads from one master.
type masterStats struct {
	cpu        float64 // used_cpu_user + used_cpu_sys, seconds
	scriptUsec float64 // µs spent in scripts and functions, from INFO commandstats
	calls      float64 // calls of scripts and functions, from INFO commandstats
}

// readMasters reads every master's counters, by node index.
func readMasters(ctx context.Context, cl *rediscluster.Cluster) ([]masterStats, error) {
	out := make([]masterStats, cl.Masters())
	for i := range out {
		info, err := cl.Node(i).Info(ctx, "cpu", "commandstats").Result()
		if err != nil {
			return nil, fmt.Errorf("INFO of master %d: %w", i, err)
		}
		out[i], err = parseMasterStats(info)
		if err != nil {
			return nil, fmt.Errorf("INFO of master %d: %w", i, err)
		}
	}
	return out, nil
}

// scriptStat matches the commandstats lines of the commands that run the
// queue's scripts.
var scriptStat = regexp.MustCompile(`(?m)^cmdstat_(?:evalsha|eval|evalsha_ro|eval_ro|fcall|fcall_ro):calls=(\d+),usec=(\d+),`)

func parseMasterStats(info string) (masterStats, error) {
	var s masterStats
	cpus := cpuLine.FindAllStringSubmatch(info, -1)
	if len(cpus) != 2 {
		return s, errors.New("no used_cpu_user and used_cpu_sys")
	}
	for _, m := range cpus {
		v, _ := strconv.ParseFloat(m[1], 64)
		s.cpu += v
	}
	for _, m := range scriptStat.FindAllStringSubmatch(info, -1) {
		calls, _ := strconv.ParseFloat(m[1], 64)
		usec, _ := strconv.ParseFloat(m[2], 64)
		s.calls += calls
		s.scriptUsec += usec
	}
	return s, nil
}
