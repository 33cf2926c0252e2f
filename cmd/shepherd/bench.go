package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"runtime/pprof"
	"slices"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/spf13/cobra"
)

// benchConfig is what the bench flags select.
type benchConfig struct {
	addr      string // Redis to use; "" starts a private redis-server
	scenarios []string
	runs      int
	scale     float64 // multiplies every job count; 1 is the sizes
	raw       string  // how to measure the raw XADD rate: auto, go, redis-benchmark
	profile   string  // a CPU profile of the whole run goes here
	shards    []int   // PS's shard counts, in order (nil: psShards)
}

// benchScenarios maps a scenario name to its run function: A to E measure
// a pool, the T scenarios a queue.
var benchScenarios = map[string]func(ctx context.Context, b *bench, run int) (result, error){
	"A":   scenarioThroughput,      // bench_throughput.go
	"B":   scenarioLatency,         // bench_pool.go
	"C":   scenarioFailover,        // bench_failover.go
	"D":   scenarioMovement,        // bench_movement.go
	"E":   scenarioScale,           // bench_scale.go
	"R":   scenarioRestarts,        // bench_restart.go
	"M":   scenarioMass,            // bench_mass.go
	"PS":  scenarioPoolShards,      // bench_pool_shards.go
	"T1":  scenarioT1,              // bench_queue_throughput.go
	"T1P": scenarioT1P,             // bench_queue_throughput.go
	"T2":  scenarioQueueLatency,    // bench_queue_latency.go
	"T3":  scenarioQueueDelayed,    // bench_queue_latency.go
	"T4":  scenarioQueueRecovery,   // bench_queue_latency.go
	"T5":  scenarioTenantFairness,  // bench_tenants.go
	"T6":  scenarioLimitFollows,    // bench_limit.go
	"T6P": scenarioLimitPartitions, // bench_limit.go
	"TM":  scenarioQueueMemory,     // bench_queue.go
	"TP":  scenarioPeriodic,        // bench_periodic.go
	"TR":  scenarioRateLimit,       // bench_rate.go
	"TS":  scenarioShards,          // bench_cluster.go
	"TW":  scenarioReplicas,        // bench_replicas.go
	"TF":  scenarioQueueFailover,   // bench_failover_sentinel.go
}

// The scenarios -scenario pool, queue and all run, in order. TF, M and PS
// are in none of them: TF takes about a minute and a half a run, M starts
// eight processes and dispatches 100,000 jobs, PS starts a Redis Cluster.
var (
	poolScenarios  = []string{"A", "B", "C", "D", "E", "R"}
	queueScenarios = []string{"T1", "T1P", "T2", "T3", "T4", "T5", "T6", "T6P", "TM", "TP", "TR", "TS", "TW"}
)

// bench is one invocation of the bench command: its Redis, config and
// the raw XADD rate every throughput is compared with.
type bench struct {
	cfg     benchConfig
	addr    string
	rdb     *redis.Client // for measurements (INFO, raw loop); pools get their own clients
	rawRate float64
	stderr  io.Writer
}

func benchCmd() *cobra.Command {
	var cfg benchConfig
	var scenario string
	cmd := &cobra.Command{
		Use:     "bench",
		Short:   "measure the pool's and the queue's throughput, latency, failover and memory",
		Long:    "Prints one JSON line per run, then a markdown summary (min/median/max).",
		GroupID: groupOther,
		Args:    noArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return runBench(cmd, cfg, scenario)
		},
	}
	fs := cmd.Flags()
	fs.StringVar(&cfg.addr, "redis", "", "Redis address to use (default: start a private redis-server on a free port)")
	fs.StringVar(&scenario, "scenario", "all", "scenario to run: A, B, C, D, E, R, M, PS (pool; M, 100,000 jobs over 8 processes, and PS, A on a 3-master Redis Cluster of its own with 1 and 3 shards, are not part of pool or all), T1, T1P, T2, T3, T4, T5, T6, T6P, TM, TP, TR, TS, TW, TF (queue; TS starts a 3-master Redis Cluster of its own, TW a primary and a replica, TF Sentinel groups to fail over: about 1.5 min a run, not part of queue or all), pool, queue or all")
	fs.IntVar(&cfg.runs, "runs", 3, "runs per scenario")
	fs.Float64Var(&cfg.scale, "scale", 1, "multiplies every job count (0.01 for a smoke run)")
	fs.StringVar(&cfg.raw, "raw", "auto", "raw XADD measurement: auto, go or redis-benchmark")
	fs.StringVar(&cfg.profile, "cpuprofile", "", "write a CPU profile of the scenarios to this file")
	fs.IntSliceVar(&cfg.shards, "shards", psShards, "the pool's shard counts scenario PS measures, in order (one result each)")
	return cmd
}

func runBench(cmd *cobra.Command, cfg benchConfig, scenario string) error {
	switch s := strings.ToUpper(scenario); {
	case s == "ALL":
		cfg.scenarios = append(append([]string{}, poolScenarios...), queueScenarios...)
	case s == "POOL":
		cfg.scenarios = poolScenarios
	case s == "QUEUE":
		cfg.scenarios = queueScenarios
	case benchScenarios[s] != nil:
		cfg.scenarios = []string{s}
	default:
		return usagef("unknown scenario %q", scenario)
	}
	switch {
	case cfg.runs < 1 || cfg.scale <= 0:
		return usagef("-runs must be ≥ 1 and -scale > 0")
	case slices.ContainsFunc(cfg.shards, func(n int) bool { return n < 1 }) || len(cfg.shards) == 0:
		return usagef("-shards must list shard counts ≥ 1")
	case cfg.raw != "auto" && cfg.raw != "go" && cfg.raw != "redis-benchmark":
		return usagef("unknown -raw %q", cfg.raw)
	}
	return benchMain(context.Background(), cfg, cmd.OutOrStdout(), cmd.ErrOrStderr())
}

func benchMain(ctx context.Context, cfg benchConfig, stdout, stderr io.Writer) error {
	b := &bench{cfg: cfg, addr: cfg.addr, stderr: stderr}
	if b.addr == "" {
		srv, err := startRedis(ctx)
		if err != nil {
			return err
		}
		defer srv.stop()
		b.addr = srv.addr
	}
	b.rdb = redis.NewClient(&redis.Options{Addr: b.addr, PoolSize: 64})
	defer b.rdb.Close()
	if err := b.rdb.Ping(ctx).Err(); err != nil {
		return fmt.Errorf("redis %s: %w", b.addr, err)
	}
	rate, how, err := b.measureRaw(ctx)
	if err != nil {
		return fmt.Errorf("raw XADD: %w", err)
	}
	b.rawRate = rate
	fmt.Fprintf(stderr, "raw XADD (%s, 50 clients, unpipelined): %.0f/s\n", how, rate)
	if cfg.profile != "" {
		f, err := os.Create(cfg.profile)
		if err != nil {
			return err
		}
		defer f.Close()
		if err := pprof.StartCPUProfile(f); err != nil {
			return err
		}
		defer pprof.StopCPUProfile()
	}
	var all []result
	for _, s := range cfg.scenarios {
		for run := 1; run <= cfg.runs; run++ {
			start := time.Now()
			first, err := benchScenarios[s](ctx, b, run)
			if err != nil {
				return fmt.Errorf("scenario %s run %d: %w", s, run, err)
			}
			variants := append([]result{first}, first.more...)
			for _, r := range variants {
				r.Scenario, r.Run, r.more = s, run, nil
				r.set("raw_xadd_per_s", b.rawRate)
				if v, ok := r.Metrics["jobs_per_s"]; ok {
					r.set("jobs_per_raw_xadd", v/b.rawRate)
				}
				line, err := r.MarshalJSON()
				if err != nil {
					return err
				}
				fmt.Fprintln(stdout, string(line))
				all = append(all, r)
			}
			fmt.Fprintf(stderr, "scenario %s run %d done in %v\n", s, run, time.Since(start).Round(time.Millisecond))
		}
	}
	fmt.Fprintln(stdout)
	writeSummary(stdout, all)
	return nil
}

// scaled returns n times the scale, at least lo.
func (b *bench) scaled(n, lo int) int {
	return max(int(float64(n)*b.cfg.scale), lo)
}

// client returns a new Redis client with its own connection pool, sized
// for a node that keeps several blocking reads open.
func (b *bench) client(poolSize int) *redis.Client {
	return redis.NewClient(&redis.Options{Addr: b.addr, PoolSize: poolSize})
}

// usedMemory returns Redis's used_memory.
func (b *bench) usedMemory(ctx context.Context) (int64, error) {
	info, err := b.rdb.Info(ctx, "memory").Result()
	if err != nil {
		return 0, err
	}
	var v int64
	for _, line := range strings.Split(info, "\r\n") {
		if s, ok := strings.CutPrefix(line, "used_memory:"); ok {
			_, err := fmt.Sscan(s, &v)
			return v, err
		}
	}
	return 0, errors.New("no used_memory in INFO")
}

// settleMemory waits until Redis has freed what earlier runs deleted
// (Shutdown unlinks, and UNLINK frees in the background), so that
// used_memory deltas measure only the run at hand.
func (b *bench) settleMemory(ctx context.Context) error {
	deadline := time.Now().Add(30 * time.Second)
	for {
		info, err := b.rdb.Info(ctx, "memory").Result()
		if err != nil {
			return err
		}
		if strings.Contains(info, "lazyfree_pending_objects:0\r\n") || time.Now().After(deadline) {
			return nil
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(50 * time.Millisecond): // polling Redis's counter
		}
	}
}

// processRSS returns this process's resident set size, from /proc.
func processRSS() int64 {
	data, err := os.ReadFile("/proc/self/status")
	if err != nil {
		return 0
	}
	for _, line := range strings.Split(string(data), "\n") {
		if s, ok := strings.CutPrefix(line, "VmRSS:"); ok {
			var kb int64
			if _, err := fmt.Sscan(strings.TrimSuffix(strings.TrimSpace(s), " kB"), &kb); err == nil {
				return kb * 1024
			}
		}
	}
	return 0
}
