package pool

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/exec"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/shepherd-go/shepherd/internal/redistest"
)

// A planning child is this test binary run again as a client-only node
// that schedules a producer and holds a ticker, so that the fault tests
// can SIGKILL and SIGSTOP a real planner.
const planChildEnv = "SHEPHERD_POOL_PLAN_CHILD"

// desiredKey is the set the children's producer plans from; ticksKey the
// list they push their ticks to ("ms pid").
func desiredKey(pool string) string { return "test:{" + pool + "}:desired" }
func ticksKey(pool string) string   { return "test:{" + pool + "}:ticks" }

// runPlanChild plans the pool named by the environment from its desired
// set (StopOthers), at 200 steps a second, and pushes the ticks of the
// ticker "beat" (50 ms), until it is killed.
func runPlanChild() int {
	pool := os.Getenv("CHILD_POOL")
	rdb := redis.NewClient(&redis.Options{Addr: os.Getenv("CHILD_ADDR"), ContextTimeoutEnabled: true})
	logger := slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelInfo}))
	ctx := context.Background()
	shards, _ := strconv.Atoi(os.Getenv("CHILD_SHARDS"))
	n, err := AddNode(ctx, rdb, pool, fastOpts(WithClientOnly(), WithLogger(logger), WithShards(max(shards, 1)))...)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	if err := n.Schedule(ctx, desiredProducer{rdb: rdb, pool: pool}, 100*time.Millisecond, WithPlanRate(200)); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	tk, err := n.NewTicker(ctx, "beat", 50*time.Millisecond)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	go func() {
		for at := range tk.C {
			rdb.RPush(ctx, ticksKey(pool), fmt.Sprint(at.UnixMilli(), " ", os.Getpid()))
		}
	}()
	fmt.Println("ready", n.ID())
	_, _ = io.Copy(io.Discard, os.Stdin) // until the parent goes away
	return 0
}

type desiredProducer struct {
	rdb  redis.UniversalClient
	pool string
}

func (desiredProducer) Name() string { return "desired" }

func (p desiredProducer) Plan(ctx context.Context) (*JobPlan, error) {
	keys, err := p.rdb.SMembers(ctx, desiredKey(p.pool)).Result()
	if err != nil {
		return nil, err
	}
	sort.Strings(keys) // started in this order: the test knows which come last
	return &JobPlan{Jobs: jobsOf("d", keys...), StopOthers: true}, nil
}

type planChild struct {
	cmd  *exec.Cmd
	node string
}

func startPlanChild(t *testing.T, pool string, shards int) *planChild {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), planChildEnv+"=1", "CHILD_ADDR="+srv.Addr(), "CHILD_POOL="+pool, "CHILD_SHARDS="+strconv.Itoa(shards))
	stdout, err := cmd.StdoutPipe()
	require.NoError(t, err)
	logFile, err := os.Create(t.TempDir() + "/child.log")
	require.NoError(t, err)
	t.Cleanup(func() { _ = logFile.Close() })
	cmd.Stderr = logFile
	stdin, err := cmd.StdinPipe()
	require.NoError(t, err)
	require.NoError(t, cmd.Start())
	t.Cleanup(func() {
		_ = stdin.Close()
		_ = cmd.Process.Signal(syscall.SIGCONT)
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
	})
	ready := make(chan string, 1)
	go func() {
		sc := bufio.NewScanner(stdout)
		if sc.Scan() {
			ready <- sc.Text()
		}
		close(ready)
		_, _ = io.Copy(io.Discard, stdout)
	}()
	select {
	case line := <-ready:
		id, ok := strings.CutPrefix(line, "ready ")
		if !ok {
			b, _ := os.ReadFile(logFile.Name())
			t.Fatalf("child did not start: %q %s", line, b)
		}
		return &planChild{cmd: cmd, node: id}
	case <-time.After(20 * time.Second):
		t.Fatal("child did not start")
	}
	return nil
}

// A planner SIGKILLed and one SIGSTOPped past the TTL while they apply
// plans: every key is started once and stopped at most once, none is
// forgotten, and the ticker delivers each tick once across the same
// faults; on a pool of one shard and of three (whose planner holds a
// fenced lease in every shard).
func TestSchedulesAndTickersSurviveKilledAndPausedPlanners(t *testing.T) {
	t.Parallel()
	for _, shards := range []int{1, 3} {
		t.Run(fmt.Sprintf("shards%d", shards), func(t *testing.T) {
			t.Parallel()
			plannersSurvive(t, shards)
		})
	}
}

func plannersSurvive(t *testing.T, shards int) {
	pool := redistest.Name(t)
	ctx := testCtx(t, 120*time.Second)
	rdb := srv.Client()
	host := addNode(t, srv.NewClient(), pool, WithShards(shards))
	rec := newRecorder()
	addWorkers(t, host, rec, 4)
	want := func(from, to int) []any {
		var ks []any
		for i := from; i < to; i++ {
			ks = append(ks, keyN(i))
		}
		return ks
	}
	children := map[string]*planChild{}
	for range 3 {
		c := startPlanChild(t, pool, shards)
		children[c.node] = c
	}
	// The desired keys come once every child runs: a child that started
	// planning while the others started (slow under -race) would finish
	// its plan before the test could kill it midway.
	require.NoError(t, rdb.SAdd(ctx, desiredKey(pool), want(0, 300)...).Err())
	planner := func() *planChild {
		var c *planChild
		require.Eventually(t, func() bool {
			info, _ := scheduleInfo(t, host, "desired")
			c = children[info.Planner]
			return c != nil
		}, 20*time.Second, 5*time.Millisecond)
		return c
	}
	runs := func(from, to int) func() bool {
		return func() bool {
			running := rec.runningKeys()
			if len(running) != to-from {
				return false
			}
			for i := from; i < to; i++ {
				if running[keyN(i)] != 1 {
					return false
				}
			}
			return true
		}
	}

	// SIGKILL the planner midway through its first plan (300 starts at
	// 200 a second).
	first := planner()
	require.Eventually(t, func() bool { return len(rec.runningKeys()) >= 60 }, 20*time.Second, time.Millisecond)
	require.NoError(t, first.cmd.Process.Kill())
	killedAt := len(rec.runningKeys())
	require.Less(t, killedAt, 300, "the planner was killed after its plan, not midway")
	delete(children, first.node)
	require.Eventually(t, runs(0, 300), 30*time.Second, 10*time.Millisecond, "the plan was not finished by the next planner")
	t.Logf("planner killed after %d of 300 starts; the next planner finished the plan", killedAt)

	// A new desired state; SIGSTOP the planner past the TTL midway
	// through its starts, and meanwhile drop every key it has not started
	// yet. When it wakes, the rest of its late plan must be refused: those
	// keys never start.
	require.NoError(t, rdb.SRem(ctx, desiredKey(pool), want(0, 100)...).Err())
	require.NoError(t, rdb.SAdd(ctx, desiredKey(pool), want(300, 500)...).Err())
	second := planner()
	require.Eventually(t, func() bool { return rec.runningKeys()[keyN(320)] == 1 }, 20*time.Second, time.Millisecond)
	require.NoError(t, second.cmd.Process.Signal(syscall.SIGSTOP))
	started := rec.runningKeys()
	dropped := map[string]bool{}
	var drop []any
	for i := 300; i < 500; i++ {
		if started[keyN(i)] == 0 {
			dropped[keyN(i)] = true
			drop = append(drop, keyN(i))
		}
	}
	require.NotEmpty(t, drop)
	require.NoError(t, rdb.SRem(ctx, desiredKey(pool), drop...).Err())
	// The dispatches it sent before the pause land within moments; they
	// were admitted while its lease held. Later than that (the lease
	// lapses at least 2/3 of WorkerTTL after the pause), only a late
	// write of the paused planner could start a dropped key.
	time.Sleep(400 * time.Millisecond)
	inFlight := map[string]bool{}
	rec.mu.Lock()
	for k := range dropped {
		if rec.starts[k] > 0 {
			inFlight[k] = true
		}
	}
	rec.mu.Unlock()
	time.Sleep(2100 * time.Millisecond) // past WorkerTTL (1 s): the lease lapses, another node plans
	require.NoError(t, second.cmd.Process.Signal(syscall.SIGCONT))
	require.Eventually(t, func() bool {
		running := rec.runningKeys()
		for i := 100; i < 500; i++ {
			if running[keyN(i)] != 1 && !dropped[keyN(i)] {
				return false
			}
		}
		return len(running) == 400-len(dropped)
	}, 30*time.Second, 10*time.Millisecond, "the new desired state was not reached")
	time.Sleep(time.Second) // the woken planner's late steps would have landed by now

	rec.mu.Lock()
	for i := range 500 {
		k := keyN(i)
		wantStarts, wantStops := 1, 0
		switch {
		case i < 100:
			wantStops = 1
		case inFlight[k]:
			wantStops = 1 // admitted before the pause, stopped by the next plan
		case dropped[k]:
			wantStarts = 0
		}
		assert.Equal(t, wantStarts, rec.starts[k], "key %s started %d times", k, rec.starts[k])
		assert.Equal(t, wantStops, rec.stops[k], "key %s stopped %d times", k, rec.stops[k])
	}
	rec.mu.Unlock()
	t.Logf("planner paused after %d of 200 new starts (%d more under way); the %d it had not started were dropped and never started",
		200-len(dropped), len(inFlight), len(dropped)-len(inFlight))

	// Each tick once, across the kill and the pause.
	raw, err := rdb.LRange(ctx, ticksKey(pool), 0, -1).Result()
	require.NoError(t, err)
	require.Greater(t, len(raw), 20)
	var ticks []tick
	for _, line := range raw {
		ms, pid, _ := strings.Cut(line, " ")
		v, err := strconv.ParseInt(ms, 10, 64)
		require.NoError(t, err)
		ticks = append(ticks, tick{at: time.UnixMilli(v), node: pid})
	}
	sortTicks(ticks)
	gap := checkOnce(t, ticks, 50*time.Millisecond)
	t.Logf("%d ticks, each once; largest gap %d periods", len(ticks), gap)
}

func sortTicks(ticks []tick) {
	sort.Slice(ticks, func(i, j int) bool { return ticks[i].at.Before(ticks[j].at) })
}
