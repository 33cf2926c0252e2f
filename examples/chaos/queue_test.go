package chaos

import (
	"bufio"
	"context"
	"fmt"
	"math/rand/v2"
	"os/exec"
	"slices"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/shepherd-go/shepherd/internal/redistest"
	"github.com/shepherd-go/shepherd/queue"
)

// queueTTL is the queue scenarios' TTL.
const queueTTL = time.Second

// queueCluster is a queue scenario's world: a private Redis with AOF (or
// a Redis Cluster), chaosqueue processes, a submitting Queue in the test
// process, the log.
type queueCluster struct {
	t    *testing.T
	srv  *redistest.Server  // the standalone Redis, or nil
	cl   *redistest.Cluster // the Redis Cluster, or nil
	addr string             // the Redis (a node of the cluster) the processes dial
	name string
	log  *Log
	key  string
	sub  *queue.Queue

	mu    sync.Mutex
	seq   int
	procs map[string]*queueProc
}

type queueProc struct {
	cmd    *exec.Cmd
	done   chan struct{}
	stderr *lockedBuffer
}

func newQueueCluster(t *testing.T, n int, opts ...queue.Option) *queueCluster {
	t.Helper()
	srv := redistest.Start(t, redistest.WithAOF())
	c := &queueCluster{t: t, srv: srv, addr: srv.Addr()}
	return c.start(n, redis0(t, srv.Addr()), opts...)
}

// newQueueClusterOn is newQueueCluster on a Redis Cluster.
func newQueueClusterOn(t *testing.T, cl *redistest.Cluster, n int, opts ...queue.Option) *queueCluster {
	t.Helper()
	rdb := cl.NewClient(0)
	// Read by the node clients it makes on first use: none yet.
	rdb.Options().ContextTimeoutEnabled = true
	c := &queueCluster{t: t, cl: cl, addr: cl.Addrs()[0]}
	return c.start(n, rdb, opts...)
}

// start opens the submitting Queue and the log on rdb and spawns n
// processes.
func (c *queueCluster) start(n int, rdb redis.UniversalClient, opts ...queue.Option) *queueCluster {
	t := c.t
	t.Helper()
	c.name, c.procs = redistest.Name(t), map[string]*queueProc{}
	var err error
	c.key, err = LogKey(c.name)
	require.NoError(t, err)
	c.log = NewLog(rdb, c.key)
	// The processes adopt the submitter's settings (WithShards among them).
	c.sub, err = queue.Open(ctxFor(t, 20*time.Second), rdb, c.name, append([]queue.Option{queue.WithTTL(queueTTL)}, opts...)...)
	require.NoError(t, err)
	t.Cleanup(func() { _ = c.sub.Close(context.Background()) })
	t.Cleanup(c.killAll)
	for range n {
		c.spawn()
	}
	return c
}

func (c *queueCluster) spawn() string {
	c.t.Helper()
	c.mu.Lock()
	c.seq++
	name := fmt.Sprintf("q%d", c.seq)
	// Every other process takes 3 tasks ahead of its workers, the others
	// take ahead on their own: those must survive its faults too.
	prefetch := 3
	if c.seq%2 == 0 {
		prefetch = -1
	}
	c.mu.Unlock()
	cmd := exec.Command(queueBin, "-addr", c.addr, fmt.Sprintf("-cluster=%v", c.cl != nil), "-queue", c.name, "-log", c.key, "-name", name,
		"-workers", "3", "-prefetch", fmt.Sprint(prefetch), "-ttl", queueTTL.String(), fmt.Sprintf("-v=%v", *chaosVerbose))
	stdout, err := cmd.StdoutPipe()
	require.NoError(c.t, err)
	p := &queueProc{cmd: cmd, done: make(chan struct{}), stderr: &lockedBuffer{}}
	cmd.Stderr = p.stderr
	require.NoError(c.t, cmd.Start())
	ready := make(chan bool, 1)
	go func() { // ends when the process's stdout closes; waits for it
		sc := bufio.NewScanner(stdout)
		ready <- sc.Scan() && sc.Text() == "ready"
		for sc.Scan() {
		}
		_ = cmd.Wait()
		close(p.done)
	}()
	select {
	case ok := <-ready:
		require.True(c.t, ok, "chaosqueue %s did not start: %s", name, p.stderr.String())
	case <-time.After(20 * time.Second):
		c.t.Fatalf("chaosqueue %s not ready after 20s: %s", name, p.stderr.String())
	}
	c.mu.Lock()
	c.procs[name] = p
	c.mu.Unlock()
	return name
}

func (c *queueCluster) killAll() {
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, p := range c.procs {
		_ = p.cmd.Process.Signal(syscall.SIGCONT)
		_ = p.cmd.Process.Kill()
		<-p.done
	}
}

// victim returns a live process, at random.
func (c *queueCluster) victim() (string, *queueProc) {
	c.mu.Lock()
	defer c.mu.Unlock()
	names := make([]string, 0, len(c.procs))
	for n := range c.procs {
		names = append(names, n)
	}
	sort.Strings(names)
	n := names[rand.IntN(len(names))]
	return n, c.procs[n]
}

// killOne SIGKILLs a process and starts another; the kill is logged once
// it took effect (what the process logged before is earlier in the log).
func (c *queueCluster) killOne(ctx context.Context) {
	name, p := c.victim()
	require.NoError(c.t, p.cmd.Process.Kill(), "%s: %s", name, p.stderr.String())
	<-p.done
	c.record(ctx, EvKill, name)
	c.mu.Lock()
	delete(c.procs, name)
	c.mu.Unlock()
	c.spawn()
}

// pauseOne SIGSTOPs a process for longer than the TTL, every handler
// and every poll, then SIGCONTs it, logging both once they took effect.
func (c *queueCluster) pauseOne(ctx context.Context) {
	name, p := c.victim()
	require.NoError(c.t, p.cmd.Process.Signal(syscall.SIGSTOP), "%s: %s", name, p.stderr.String())
	c.record(ctx, EvFreeze, name)
	time.Sleep(queueTTL + 2*time.Second)
	require.NoError(c.t, p.cmd.Process.Signal(syscall.SIGCONT))
	c.record(ctx, EvThaw, name)
}

func (c *queueCluster) record(ctx context.Context, event, proc string) {
	require.NoError(c.t, c.log.AppendRetry(ctx, event, proc, "", ""))
}

// maxPendingPerSubmitter bounds a submitter's unfinished tasks: the
// submitters outpace the workers (about 1,000 Submits/s against 300
// tasks/s here), and an unbounded backlog makes a long run's final
// drain outlast the test's wait for each future.
const maxPendingPerSubmitter = 100

// throttle waits until fewer than limit of pending are unfinished,
// dropping the finished ones from its front; false if stop came first.
func throttle(pending *[]*queue.Future, limit int, stop <-chan struct{}) bool {
	for len(*pending) >= limit {
		select {
		case <-(*pending)[0].Done():
			*pending = (*pending)[1:]
		case <-stop:
			return false
		}
	}
	return true
}

// submitter submits tasks until stop, a third of them failing or
// panicking on their first attempt, into acked; the ids of failed Submits
// go to failed, with whether Redis was down (killed and restarting) then.
// It keeps at most maxPendingPerSubmitter of its tasks unfinished.
func (c *queueCluster) submitter(ctx context.Context, stop <-chan struct{}, id int, acked, failed *sync.Map, redisDown *atomic.Bool) {
	var pending []*queue.Future
	for i := 0; ; i++ {
		if !throttle(&pending, maxPendingPerSubmitter, stop) {
			return
		}
		select {
		case <-stop:
			return
		case <-time.After(time.Duration(rand.IntN(8)) * time.Millisecond):
		}
		payload := []string{"ok", "ok", "ok", "ok", "fail", "panic"}[rand.IntN(6)]
		taskID := fmt.Sprintf("s%d-%d", id, i)
		down := redisDown.Load()
		sctx, cancel := context.WithTimeout(ctx, 2*time.Second)
		f, err := c.sub.Submit(sctx, []byte(payload), queue.WithTaskID(taskID), queue.WithMaxAttempts(10))
		cancel()
		if err != nil {
			failed.Store(taskID, down || redisDown.Load())
			continue
		}
		acked.Store(taskID, f)
		pending = append(pending, f)
	}
}

// TestChaosQueue serves a queue from three processes while one is killed
// (and replaced), one is paused for longer than every timeout, and Redis
// is killed and restarted with AOF, under a steady stream of Submits.
// From the log it checks that every acknowledged task completed once with
// an outcome from a logged attempt, that no failed Submit's task ran, and
// how long a killed or paused process's tasks took to start elsewhere.
func TestChaosQueue(t *testing.T) {
	t.Parallel()
	chaosQueue(t)
}

// TestChaosQueueSharded is TestChaosQueue on a queue of 3 shards (the
// tasks, by their ids, spread over them).
func TestChaosQueueSharded(t *testing.T) {
	t.Parallel()
	chaosQueue(t, queue.WithShards(3))
}

// TestChaosQueueShardMoves is TestChaosQueueSharded on a Redis Cluster of
// 3 masters and a fourth added, whose third fault moves a shard's slot,
// with its keys, to another master (a shard a round, round the masters)
// instead of restarting Redis: a cluster scaling out under load, with
// kills and pauses between the moves.
func TestChaosQueueShardMoves(t *testing.T) {
	t.Parallel()
	cl := redistest.StartCluster(t, 3)
	added, err := cl.AddMaster(ctxFor(t, time.Minute))
	require.NoError(t, err)
	masters := []int{0, 1, 2, added}
	c := newQueueClusterOn(t, cl, 3, queue.WithShards(3))
	round := 0
	move := func(ctx context.Context, redisDown *atomic.Bool) {
		round++
		st, err := c.sub.Stats(ctx)
		require.NoError(t, err)
		s := st.PerShard[round%3]
		from, err := cl.NodeOf(ctx, "shepherd:{"+s.Tag+"}:queue:settings")
		require.NoError(t, err)
		to := masters[(slices.Index(masters, from)+1)%len(masters)]
		redisDown.Store(true) // a Submit that fails meanwhile may still run (its withdrawal races its retried call)
		began := time.Now()
		require.NoError(t, cl.MoveSlot(ctx, s.Slot, to, 2, 2*time.Millisecond))
		t.Logf("shard %d moved from node %d to node %d in %v", s.Shard, from, to, time.Since(began).Round(time.Millisecond))
		redisDown.Store(false)
	}
	chaosQueueWith(t, c, "shard moves", move)
}

func chaosQueue(t *testing.T, opts ...queue.Option) {
	c := newQueueCluster(t, 3, opts...)
	restart := func(ctx context.Context, redisDown *atomic.Bool) {
		redisDown.Store(true)
		require.NoError(t, c.srv.Kill())
		time.Sleep(200 * time.Millisecond)
		require.NoError(t, c.srv.Restart())
		time.Sleep(time.Second) // until the clients are back
		redisDown.Store(false)
	}
	chaosQueueWith(t, c, "Redis restarts", restart)
}

// chaosQueueWith runs the queue scenario on c: submitters, and rounds of
// a kill, a pause and the third fault, until the phase ends; then its
// checks. The third fault marks Redis down (redisDown) while a Submit
// that fails may still have its task run (see checkQueueLog).
func chaosQueueWith(t *testing.T, c *queueCluster, third string, fault func(ctx context.Context, redisDown *atomic.Bool)) {
	ctx := ctxFor(t, 5*time.Minute)
	var acked, failed sync.Map
	var redisDown atomic.Bool
	stop := make(chan struct{})
	var wg sync.WaitGroup
	for i := range 4 {
		wg.Add(1)
		go func() { defer wg.Done(); c.submitter(ctx, stop, i, &acked, &failed, &redisDown) }()
	}

	phase := faultPhase(3 * time.Second) // one round of each fault in CI
	end := time.Now().Add(phase)
	kills, pauses, thirds := 0, 0, 0
	for round := 0; time.Now().Before(end) || round == 0; round++ {
		time.Sleep(500 * time.Millisecond) // let work flow between faults
		c.killOne(ctx)
		kills++
		time.Sleep(500 * time.Millisecond)
		c.pauseOne(ctx)
		pauses++

		time.Sleep(500 * time.Millisecond)
		fault(ctx, &redisDown)
		thirds++
	}
	close(stop)
	wg.Wait()
	if st, err := c.sub.Stats(ctx); err == nil {
		t.Logf("after the faults: %d tasks available, %d in flight, %d retrying", st.Available, st.InFlight, st.Retrying)
	}

	// Every acknowledged task completes, with an outcome.
	n := 0
	acked.Range(func(k, v any) bool {
		n++
		res, err := waitFuture(v.(*queue.Future), 60*time.Second)
		if err != nil {
			info, ierr := c.sub.Inspect(ctx, k.(string))
			entries, _ := c.log.Read(ctx)
			var mine []Entry
			for _, e := range entries {
				if e.Key == k.(string) || e.Key == "" {
					mine = append(mine, e)
				}
			}
			t.Fatalf("task %s: %v; now %+v (%v); its log: %+v", k, err, info, ierr, mine)
		}
		stored, err := c.sub.Result(ctx, k.(string))
		require.NoError(t, err, "task %s", k)
		assert.Equal(t, string(stored), string(res), "task %s: the future and the stored outcome differ", k)
		return true
	})
	entries, err := c.log.Read(ctx)
	require.NoError(t, err)
	check := checkQueueLog(t, entries, &acked, &failed)
	nFailed := 0
	failed.Range(func(any, any) bool { nFailed++; return true })
	t.Logf("%d tasks acknowledged, %d Submits failed (%d of whose tasks ran: Redis died after receiving them); %d kills, %d pauses, %d %s; %d attempts started",
		n, nFailed, check.failedRan, kills, pauses, thirds, third, check.starts)
	t.Logf("recovery after a kill or a pause (fault → the task's next start elsewhere): %s", check.recovery)
	if len(check.recoveries) > 0 {
		assert.LessOrEqual(t, check.recoveries[len(check.recoveries)-1], queueTTL+time.Second,
			"a killed or paused process's task waited longer than TTL + 1s")
	}
}

func waitFuture(f *queue.Future, d time.Duration) ([]byte, error) {
	ctx, cancel := context.WithTimeout(context.Background(), d)
	defer cancel()
	return f.Wait(ctx)
}

type queueCheck struct {
	starts     int
	failedRan  int             // tasks of failed Submits that ran (Redis died after receiving them)
	recoveries []time.Duration // sorted
	recovery   string
}

// checkQueueLog checks the log against the acknowledged tasks: every
// outcome "proc/attempt" names a logged start and end of that attempt,
// every task that ran was submitted, and the task of a failed Submit ran
// only if Redis died after receiving it (its withdrawal then races with
// the workers once Redis is back: see Queue.Submit); it measures
// recoveries.
func checkQueueLog(t *testing.T, entries []Entry, acked, failed *sync.Map) queueCheck {
	t.Helper()
	type attempt struct{ proc, att string }
	started := map[string][]Entry{} // task → its starts, in order
	ended := map[attempt]map[string]bool{}
	var out queueCheck
	for _, e := range entries {
		switch e.Event {
		case EvTaskStart:
			out.starts++
			started[e.Key] = append(started[e.Key], e)
		case EvTaskEnd:
			a := attempt{e.Proc, e.Worker}
			if ended[a] == nil {
				ended[a] = map[string]bool{}
			}
			ended[a][e.Key] = true
		}
	}
	for id := range started {
		if _, ok := acked.Load(id); ok {
			continue
		}
		down, ok := failed.Load(id)
		require.True(t, ok, "task %s ran but was never submitted", id)
		assert.True(t, down.(bool), "task %s ran but its Submit failed while Redis was up", id)
		out.failedRan++
	}
	acked.Range(func(k, v any) bool {
		id := k.(string)
		res, _ := v.(*queue.Future).Wait(context.Background()) // completed above
		proc, att, _ := strings.Cut(string(res), "/")
		assert.True(t, ended[attempt{proc, att}][id], "task %s: its outcome %q is from no logged attempt", id, res)
		return true
	})
	// Recovery: each task a killed or frozen process had started and not
	// ended at the fault, to its next start by another process.
	for i, f := range entries {
		if f.Event != EvKill && f.Event != EvFreeze {
			continue
		}
		open := map[string]bool{}
		for _, e := range entries[:i] {
			switch {
			case e.Event == EvTaskStart && e.Proc == f.Proc:
				open[e.Key] = true
			case e.Event == EvTaskEnd && e.Proc == f.Proc:
				delete(open, e.Key)
			}
		}
		for id := range open {
			for _, s := range started[id] {
				if s.Proc != f.Proc && s.Ms >= f.Ms {
					out.recoveries = append(out.recoveries, time.Duration(s.Ms-f.Ms)*time.Millisecond)
					break
				}
			}
		}
	}
	sort.Slice(out.recoveries, func(i, j int) bool { return out.recoveries[i] < out.recoveries[j] })
	if r := out.recoveries; len(r) > 0 {
		out.recovery = fmt.Sprintf("%d tasks, p50 %v, p99 %v, max %v", len(r), r[len(r)/2], r[(len(r)*99)/100], r[len(r)-1])
	} else {
		out.recovery = "no task was in flight at a fault"
	}
	return out
}

// redis0 returns a client that honours context deadlines on socket I/O,
// closed at the end of the test.
func redis0(t *testing.T, addr string) *redis.Client {
	rdb := redis.NewClient(&redis.Options{Addr: addr, ContextTimeoutEnabled: true})
	t.Cleanup(func() { _ = rdb.Close() })
	return rdb
}
