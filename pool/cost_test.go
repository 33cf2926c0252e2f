package pool

import (
	"context"
	"fmt"
	"os"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/shepherd-go/shepherd/internal/redistest"
)

// Where a dispatch's Redis time goes (issue #41): run alone, one at a
// time, on the test's private redis-server:
//
//	go test -run '^$' -bench CostPerDispatch -benchtime 1x ./pool/
//
// BenchmarkCostPerDispatch runs scenario A's shape (2 nodes × 4 workers,
// a client-only node, 64 producers, SHEPHERD_COST jobs of 64 bytes,
// 20,000 by default) and prints, per dispatch, Redis's CPU, its script
// calls by script (a go-redis hook on every node's client), and every
// command INFO commandstats counted (those the scripts ran included),
// with its usec per call; then the memory per running job.

// costScripts names the scripts the hook tells apart; the rest count as
// "other".
var costScripts = map[string]*redis.Script{
	"admit": admitRouteScript, "claim": claimScript, "started": startedScript,
	"failed": failedScript,
}

// scriptCounter is a go-redis hook that counts EVALSHA and EVAL calls by
// script, in and out of pipelines.
type scriptCounter struct {
	names map[string]string // sha → name
	mu    sync.Mutex
	calls map[string]int
}

func newScriptCounter() *scriptCounter {
	names := map[string]string{}
	for name, s := range costScripts {
		names[s.Hash()] = name
	}
	return &scriptCounter{names: names, calls: map[string]int{}}
}

func (c *scriptCounter) count(cmd redis.Cmder) {
	n := cmd.Name()
	if n != "evalsha" && n != "eval" {
		return
	}
	name := "other"
	if a := cmd.Args(); len(a) > 1 && n == "evalsha" {
		if s, ok := c.names[fmt.Sprint(a[1])]; ok {
			name = s
		}
	}
	c.mu.Lock()
	c.calls[name]++
	c.mu.Unlock()
}

func (c *scriptCounter) DialHook(next redis.DialHook) redis.DialHook { return next }
func (c *scriptCounter) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		c.count(cmd)
		return next(ctx, cmd)
	}
}
func (c *scriptCounter) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		for _, cmd := range cmds {
			c.count(cmd)
		}
		return next(ctx, cmds)
	}
}

func (c *scriptCounter) reset() {
	c.mu.Lock()
	c.calls = map[string]int{}
	c.mu.Unlock()
}

var costCmdLine = regexp.MustCompile(`(?m)^cmdstat_([a-z|]+):calls=(\d+),usec=(\d+),`)

// costCPU is Redis's CPU time so far (redistest.CPU; 0 when INFO fails).
func costCPU(ctx context.Context, rdb redis.UniversalClient) float64 {
	v, _ := redistest.CPU(ctx, rdb)
	return v
}

func BenchmarkCostPerDispatch(b *testing.B) {
	jobs := 20000
	if v, err := strconv.Atoi(os.Getenv("SHEPHERD_COST")); err == nil && v > 0 {
		jobs = v
	}
	producers := 64
	if v, err := strconv.Atoi(os.Getenv("SHEPHERD_COST_PRODUCERS")); err == nil && v > 0 {
		producers = v
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	name := redistest.Name(b)
	hook := newScriptCounter()
	var clients []*redis.Client
	client := func() *redis.Client {
		c := srv.NewClient()
		c.AddHook(hook)
		clients = append(clients, c)
		return c
	}
	defer func() {
		for _, c := range clients {
			_ = c.Close()
		}
	}()
	var nodes []*Node
	for range 2 {
		n, err := AddNode(ctx, client(), name)
		if err != nil {
			b.Fatal(err)
		}
		nodes = append(nodes, n)
	}
	for i := range 8 {
		if _, err := nodes[i%2].AddWorker(ctx, nopHandler{}); err != nil {
			b.Fatal(err)
		}
	}
	disp, err := AddNode(ctx, client(), name, WithClientOnly())
	if err != nil {
		b.Fatal(err)
	}
	admin := srv.NewClient()
	defer admin.Close()
	payload := make([]byte, 64)
	for round := range b.N {
		prefix := "key-" + strconv.Itoa(round) + "-"
		memBefore := costMemory(ctx, b, admin)
		hook.reset()
		admin.ConfigResetStat(ctx)
		cpu0 := costCPU(ctx, admin)
		began := time.Now()
		var next, failed atomic.Int64
		var wg sync.WaitGroup
		for range producers {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for {
					i := next.Add(1) - 1
					if i >= int64(jobs) {
						return
					}
					if err := disp.DispatchJob(ctx, prefix+strconv.FormatInt(i, 10), payload); err != nil {
						b.Error(err)
						failed.Add(1)
						return
					}
				}
			}()
		}
		wg.Wait()
		if failed.Load() > 0 {
			b.FailNow()
		}
		took := time.Since(began)
		cpu := costCPU(ctx, admin) - cpu0
		stats := admin.Info(ctx, "commandstats").Val()
		memAfter := costMemory(ctx, b, admin)
		f := float64(jobs)
		b.Logf("%d jobs in %v (%.0f/s); Redis CPU %.1f µs per dispatch; memory %.0f bytes per running job",
			jobs, took.Round(time.Millisecond), f/took.Seconds(), cpu*1e6/f, float64(memAfter-memBefore)/f)
		hook.mu.Lock()
		var sb strings.Builder
		total := 0
		for _, k := range sortedKeys(hook.calls) {
			fmt.Fprintf(&sb, " %s %.3f", k, float64(hook.calls[k])/f)
			total += hook.calls[k]
		}
		hook.mu.Unlock()
		b.Logf("script calls per dispatch %.3f:%s", float64(total)/f, sb.String())
		type cmdStat struct {
			name        string
			calls, usec int64
		}
		var cs []cmdStat
		for _, m := range costCmdLine.FindAllStringSubmatch(stats, -1) {
			calls, _ := strconv.ParseInt(m[2], 10, 64)
			usec, _ := strconv.ParseInt(m[3], 10, 64)
			cs = append(cs, cmdStat{m[1], calls, usec})
		}
		sort.Slice(cs, func(i, j int) bool { return cs[i].usec > cs[j].usec })
		for _, c := range cs {
			b.Logf("  %-14s %7.3f calls/job  %6.2f µs/call  %6.2f µs/job", c.name, float64(c.calls)/f,
				float64(c.usec)/float64(max(c.calls, 1)), float64(c.usec)/f)
		}
		b.ReportMetric(cpu*1e6/f, "redis-cpu-µs/job")
		b.ReportMetric(float64(memAfter-memBefore)/f, "redis-bytes/job")
	}
	if err := disp.Shutdown(ctx); err != nil {
		b.Fatal(err)
	}
}

// costMemory is Redis's used_memory once the allocator settled.
func costMemory(ctx context.Context, b *testing.B, rdb *redis.Client) int64 {
	time.Sleep(200 * time.Millisecond) // a measurement pause, not a wait for a condition
	m := regexp.MustCompile(`(?m)^used_memory:(\d+)\r?$`).FindStringSubmatch(rdb.Info(ctx, "memory").Val())
	if m == nil {
		b.Fatal("no used_memory in INFO memory")
	}
	n, _ := strconv.ParseInt(m[1], 10, 64)
	return n
}

func sortedKeys(m map[string]int) []string {
	ks := make([]string, 0, len(m))
	for k := range m {
		ks = append(ks, k)
	}
	sort.Strings(ks)
	return ks
}
