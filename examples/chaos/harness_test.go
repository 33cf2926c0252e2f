package chaos

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/shepherd-go/shepherd/internal/keys"
	"github.com/shepherd-go/shepherd/internal/redistest"
	"github.com/shepherd-go/shepherd/internal/redisutil"
	"github.com/shepherd-go/shepherd/internal/testlog"
	"github.com/shepherd-go/shepherd/pool"
	"github.com/stretchr/testify/require"
)

// Timings of every scenario: short, so that faults play out in seconds.
const (
	workerTTL  = time.Second
	pendingTTL = 2 * time.Second
)

// cluster is one scenario's world: a private Redis, worker processes, a
// client-only dispatcher node in the test process, and the log.
type cluster struct {
	t      *testing.T
	srv    *redistest.Server  // the pool's and the log's Redis, or nil on a Redis Cluster
	rc     *redistest.Cluster // the pool's Redis Cluster, or nil
	logSrv *redistest.Server  // the log's Redis (srv, or a standalone one beside rc)
	rdb    redis.UniversalClient
	pool   string
	shards int // the pool's shard count
	logKey string
	log    *Log
	disp   *pool.Node
	args   []string              // extra worker flags
	disp2  redis.UniversalClient // a spare client for nodes a test adds
	timing timing                // the pool's timings, for every process
	// dispOpts are the dispatcher's extra options (WithReplicas).
	dispOpts []pool.NodeOption

	mu    sync.Mutex
	seq   int
	procs map[string]*proc
	acked map[string]bool // dispatched and not stopped, as far as we know
	// maxLive caps the acknowledged jobs churn keeps running: beyond it,
	// each dispatch also stops a job. 0: no cap.
	maxLive int
}

// proc is a running worker process.
type proc struct {
	name   string
	cmd    *exec.Cmd
	done   chan struct{} // closed once the process has been waited for
	stderr *lockedBuffer
}

// lockedBuffer keeps a process's stderr for the test to read, echoed to
// the test's own with -chaos.v.
type lockedBuffer struct{ testlog.Buffer }

func (l *lockedBuffer) Write(p []byte) (int, error) {
	if *chaosVerbose {
		os.Stderr.Write(p)
	}
	return l.Buffer.Write(p)
}

// timing holds the pool-wide timings a cluster runs with.
type timing struct {
	ttl, pending time.Duration // WorkerTTL, PendingJobTTL
}

// shortTiming is what most scenarios use: faults play out in seconds.
var shortTiming = timing{ttl: workerTTL, pending: pendingTTL}

// newCluster starts Redis (with opts), the dispatcher and n worker
// processes run with args, with the short timings.
func newCluster(t *testing.T, n int, opts []redistest.Option, args ...string) *cluster {
	t.Helper()
	return newClusterTimed(t, n, shortTiming, opts, args...)
}

// newClusterTimed is newCluster with the timings tm.
func newClusterTimed(t *testing.T, n int, tm timing, opts []redistest.Option, args ...string) *cluster {
	t.Helper()
	srv := redistest.Start(t, opts...)
	c := &cluster{t: t, srv: srv, logSrv: srv, shards: 1, args: args, timing: tm}
	return c.start(n)
}

// start opens the log and the dispatcher and spawns n worker processes
// (of pool c.pool, if set, else of a name of the test's).
func (c *cluster) start(n int) *cluster {
	t := c.t
	t.Helper()
	if c.pool == "" {
		c.pool = redistest.Name(t)
	}
	c.procs, c.acked = map[string]*proc{}, map[string]bool{}
	c.rdb = c.newClient()
	var err error
	c.logKey, err = LogKey(c.pool)
	require.NoError(t, err)
	logRdb := c.logSrv.NewClient()
	t.Cleanup(func() { _ = logRdb.Close() })
	c.log = NewLog(logRdb, c.logKey)
	ctx := ctxFor(t, 20*time.Second)
	shardOpts, err := ShardOptions(c.shards)
	require.NoError(t, err)
	opts := append([]pool.NodeOption{pool.WithClientOnly(), pool.WithWorkerTTL(c.timing.ttl),
		pool.WithPendingJobTTL(c.timing.pending)}, append(shardOpts, c.dispOpts...)...)
	c.disp, err = pool.AddNode(ctx, c.newClient(), c.pool, opts...)
	require.NoError(t, err)
	t.Cleanup(func() { _ = c.disp.Close(context.Background()) })
	t.Cleanup(c.killAll) // runs before the server's cleanup
	t.Cleanup(c.dump)
	for i := 0; i < n; i++ {
		c.spawn()
	}
	return c
}

// dump writes the log of a failed scenario to the -chaos.dump directory,
// one JSON array of entries, named after the test.
func (c *cluster) dump() {
	if *chaosDump == "" || !c.t.Failed() {
		return
	}
	entries, err := c.log.Read(context.Background())
	if err == nil {
		var b []byte
		if b, err = json.Marshal(entries); err == nil {
			path := filepath.Join(*chaosDump, strings.ReplaceAll(c.t.Name(), "/", "_")+".json")
			if err = os.WriteFile(path, b, 0o644); err == nil {
				c.t.Logf("the log is in %s", path)
			}
		}
	}
	if err != nil {
		c.t.Logf("chaos.dump: %v", err)
	}
}

// newClient returns a client of the pool's Redis (a cluster client on a
// Redis Cluster) that honours context deadlines on socket I/O (go-redis
// ignores them otherwise), closed at the end of the test.
func (c *cluster) newClient() redis.UniversalClient {
	var rdb redis.UniversalClient
	if c.rc != nil {
		cc := c.rc.NewClient(0)
		// Read by the node clients it makes on first use: none yet.
		cc.Options().ContextTimeoutEnabled = true
		rdb = cc
	} else {
		rdb = redis.NewClient(&redis.Options{Addr: c.srv.Addr(), ContextTimeoutEnabled: true})
	}
	c.t.Cleanup(func() { _ = rdb.Close() })
	return rdb
}

// addr is the address the worker processes dial: the Redis, or a node of
// the Redis Cluster.
func (c *cluster) addr() string {
	if c.rc != nil {
		return c.rc.Addrs()[0]
	}
	return c.srv.Addr()
}

func ctxFor(t *testing.T, d time.Duration) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), d)
	t.Cleanup(cancel)
	return ctx
}

// spawn starts a worker process and waits until its workers are added.
func (c *cluster) spawn() string {
	c.t.Helper()
	return c.spawnWith()
}

// spawnWith is spawn with extra worker flags for this process only.
func (c *cluster) spawnWith(extra ...string) string {
	c.t.Helper()
	c.mu.Lock()
	c.seq++
	name := fmt.Sprintf("p%d", c.seq)
	c.mu.Unlock()
	args := append([]string{"-addr", c.addr(), "-pool", c.pool, "-log", c.logKey, "-log-addr", c.logSrv.Addr(),
		fmt.Sprintf("-cluster=%v", c.rc != nil), "-shards", fmt.Sprint(c.shards), "-name", name,
		"-workers", "3", "-ttl", c.timing.ttl.String(), "-pending", c.timing.pending.String()}, append(c.args, extra...)...)
	if *chaosVerbose {
		args = append(args, "-v")
	}
	cmd := exec.Command(workerBin, args...)
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	p := &proc{name: name, cmd: cmd, done: make(chan struct{}), stderr: &lockedBuffer{}}
	cmd.Stderr = p.stderr
	stdout, err := cmd.StdoutPipe()
	require.NoError(c.t, err)
	require.NoError(c.t, cmd.Start())
	ready := make(chan bool, 1)
	go func() {
		sc := bufio.NewScanner(stdout)
		ok := sc.Scan() && sc.Text() == "ready"
		ready <- ok
		for sc.Scan() {
		}
		_ = cmd.Wait()
		close(p.done)
	}()
	c.mu.Lock()
	c.procs[name] = p
	c.mu.Unlock()
	select {
	case ok := <-ready:
		require.True(c.t, ok, "worker %s did not start: %s", name, p.stderr.String())
	case <-time.After(20 * time.Second):
		c.t.Fatalf("worker %s not ready after 20s: %s", name, p.stderr.String())
	}
	return name
}

// live returns the names of the running worker processes, sorted.
func (c *cluster) live() []string {
	c.mu.Lock()
	defer c.mu.Unlock()
	var out []string
	for name := range c.procs {
		out = append(out, name)
	}
	sort.Strings(out)
	return out
}

func (c *cluster) take(name string) *proc {
	c.mu.Lock()
	defer c.mu.Unlock()
	p := c.procs[name]
	delete(c.procs, name)
	return p
}

func (c *cluster) get(name string) *proc {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.procs[name]
}

func (c *cluster) note(event, proc, key string) {
	c.t.Helper()
	require.NoError(c.t, c.log.AppendRetry(ctxFor(c.t, 30*time.Second), event, proc, "", key))
}

// kill SIGKILLs a worker process. The kill is logged first, so that
// recovery times count from before the process died.
func (c *cluster) kill(name string) {
	c.t.Helper()
	c.note(EvKill, name, "")
	p := c.take(name)
	require.NoError(c.t, p.cmd.Process.Kill())
	<-p.done
}

// freeze SIGSTOPs a worker process; thaw SIGCONTs it.
func (c *cluster) freeze(name string) {
	c.t.Helper()
	c.note(EvFreeze, name, "")
	require.NoError(c.t, syscall.Kill(c.get(name).cmd.Process.Pid, syscall.SIGSTOP))
}

// thaw logs first: once SIGCONTed, the process may log its stops before
// the harness could log the thaw.
func (c *cluster) thaw(name string) {
	c.t.Helper()
	c.note(EvThaw, name, "")
	require.NoError(c.t, syscall.Kill(c.get(name).cmd.Process.Pid, syscall.SIGCONT))
}

// term asks a worker process to Close its node, and waits for it to exit.
func (c *cluster) term(name string) {
	c.t.Helper()
	p := c.take(name)
	require.NoError(c.t, p.cmd.Process.Signal(syscall.SIGTERM))
	c.awaitExit(p)
}

func (c *cluster) awaitExit(p *proc) {
	c.t.Helper()
	select {
	case <-p.done:
	case <-time.After(30 * time.Second):
		c.t.Fatalf("worker %s did not exit: %s", p.name, p.stderr.String())
	}
	require.True(c.t, p.cmd.ProcessState.Success(), "worker %s failed: %s", p.name, p.stderr.String())
	c.note(EvExit, p.name, "")
}

// killAll kills what is left; test cleanup.
func (c *cluster) killAll() {
	c.mu.Lock()
	procs := c.procs
	c.procs = map[string]*proc{}
	c.mu.Unlock()
	for _, p := range procs {
		_ = p.cmd.Process.Signal(syscall.SIGCONT)
		_ = p.cmd.Process.Kill()
		<-p.done
	}
}

// dispatch dispatches key and logs the outcome: "dispatch" when
// DispatchJob returned nil, "unknown" otherwise.
func (c *cluster) dispatch(ctx context.Context, key string) error {
	err := c.disp.DispatchJob(ctx, key, []byte("payload of "+key))
	ev := EvDispatch
	if err != nil {
		ev = EvUnknown
	}
	if lerr := c.log.AppendRetry(context.WithoutCancel(ctx), ev, "", "", key); lerr != nil {
		return errors.Join(err, lerr)
	}
	if err == nil {
		c.mu.Lock()
		c.acked[key] = true
		c.mu.Unlock()
	}
	return err
}

// stop stops key and logs the outcome like dispatch.
func (c *cluster) stop(ctx context.Context, key string) error {
	err := c.disp.StopJob(ctx, key)
	ev := EvStopJob
	if err != nil {
		ev = EvUnknown
	}
	c.mu.Lock()
	delete(c.acked, key)
	c.mu.Unlock()
	if lerr := c.log.AppendRetry(context.WithoutCancel(ctx), ev, "", "", key); lerr != nil {
		return errors.Join(err, lerr)
	}
	return err
}

// takeAcked takes a random acknowledged key out of the set, so that no
// other goroutine stops it too, or returns "".
func (c *cluster) takeAcked() string {
	c.mu.Lock()
	defer c.mu.Unlock()
	for k := range c.acked {
		delete(c.acked, k)
		return k // map order is random enough
	}
	return ""
}

func (c *cluster) ackedKeys() []string {
	c.mu.Lock()
	defer c.mu.Unlock()
	out := make([]string, 0, len(c.acked))
	for k := range c.acked {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

// dispatchN dispatches n keys with prefix, 8 at a time, and requires
// every DispatchJob to succeed.
func (c *cluster) dispatchN(prefix string, n int) {
	c.t.Helper()
	ctx := ctxFor(c.t, 60*time.Second)
	errs := make(chan error, n)
	sem := make(chan struct{}, 8)
	for i := 0; i < n; i++ {
		sem <- struct{}{}
		go func() {
			defer func() { <-sem }()
			errs <- c.dispatch(ctx, fmt.Sprintf("%s-%04d", prefix, i))
		}()
	}
	for i := 0; i < n; i++ {
		require.NoError(c.t, <-errs)
	}
}

// churn dispatches new keys with workers goroutines, and stops one key for
// every stopEvery dispatched (and one per dispatch above maxLive), until
// ctx ends. It returns how many
// dispatches succeeded and failed. Failures are expected under faults and
// logged as unknown; StopJob of an acknowledged key must never report it
// missing.
func (c *cluster) churn(ctx context.Context, prefix string, workers, stopEvery int) (ok, failed int) {
	var mu sync.Mutex
	var wg sync.WaitGroup
	seq := 0
	for g := 0; g < workers; g++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for ctx.Err() == nil {
				mu.Lock()
				seq++
				i := seq
				mu.Unlock()
				dctx, cancel := context.WithTimeout(ctx, 10*time.Second)
				err := c.dispatch(dctx, fmt.Sprintf("%s-%05d", prefix, i))
				cancel()
				mu.Lock()
				if err == nil {
					ok++
				} else {
					failed++
				}
				mu.Unlock()
				c.mu.Lock()
				full := c.maxLive > 0 && len(c.acked) > c.maxLive
				c.mu.Unlock()
				if full || (stopEvery > 0 && i%stopEvery == 0) {
					if k := c.takeAcked(); k != "" {
						sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
						if err := c.stop(sctx, k); errors.Is(err, pool.ErrJobNotFound) {
							c.t.Errorf("StopJob of acknowledged key %s: %v", k, err)
						}
						cancel()
					}
				}
			}
		}()
	}
	wg.Wait()
	return ok, failed
}

// report reads the log and checks it.
func (c *cluster) report() *Report {
	c.t.Helper()
	entries, err := c.log.Read(ctxFor(c.t, 10*time.Second))
	require.NoError(c.t, err)
	return Check(entries)
}

// settle waits until the log shows every acknowledged job running exactly
// once and the pool's records agree, and returns the report.
func (c *cluster) settle(within time.Duration) *Report {
	c.t.Helper()
	deadline := time.Now().Add(within)
	for {
		r := c.report()
		err := r.AtRest()
		if err == nil {
			err = c.recordsAgree(r)
		}
		if err == nil {
			return r
		}
		if time.Now().After(deadline) {
			c.t.Fatalf("not at rest after %v: %v\n%s%s", within, err, r.Summary(), c.history(err))
		}
		time.Sleep(100 * time.Millisecond) // polling interval, not synchronization
	}
}

// history returns, for an error that names a job ("job KEY ..."), the
// log's entries of that key and the faults, to see what led there.
func (c *cluster) history(err error) string {
	rest, ok := strings.CutPrefix(err.Error(), "job ")
	if !ok {
		return ""
	}
	key, _, _ := strings.Cut(rest, " ")
	key = strings.TrimSuffix(key, ":")
	entries, lerr := c.log.Read(ctxFor(c.t, 10*time.Second))
	if lerr != nil || len(entries) == 0 {
		return ""
	}
	var b strings.Builder
	fmt.Fprintf(&b, "\nthe log of %s and the faults (ms from the first entry):", key)
	for _, e := range entries {
		if e.Key == key || e.Event == EvKill || e.Event == EvFreeze || e.Event == EvThaw || e.Event == EvJoin || e.Event == EvFault {
			fmt.Fprintf(&b, "\n  %6d %s %s %s %s", e.Ms-entries[0].Ms, e.Event, e.Proc, e.Worker, e.Key)
		}
	}
	return b.String()
}

// recordsAgree checks that the pool's records hold every key that runs,
// and no other acknowledged-as-stopped key.
func (c *cluster) recordsAgree(r *Report) error {
	ctx := ctxFor(c.t, 10*time.Second)
	jobKeys, err := c.disp.JobKeys(ctx)
	if err != nil {
		return err
	}
	have := map[string]bool{}
	for _, k := range jobKeys {
		have[k] = true
	}
	for k := range r.Running {
		if !have[k] {
			return fmt.Errorf("job %s runs but the pool has no record of it", k)
		}
	}
	for _, k := range c.ackedKeys() {
		if !have[k] {
			return fmt.Errorf("acknowledged job %s has no record", k)
		}
	}
	return c.recordsMatchHandlers(ctx, r, jobKeys)
}

// recordsMatchHandlers compares every key's last handler event with what
// InspectJob says of it: a job the pool records as running on a node must
// have last started on that node's process, and a job whose last event is
// a start on a live process must be recorded as running there. A record
// that says running with nothing running is a job nothing will ever
// restart.
func (c *cluster) recordsMatchHandlers(ctx context.Context, r *Report, jobKeys []string) error {
	keys := map[string]bool{}
	for _, k := range jobKeys {
		keys[k] = true
	}
	for k := range r.Last {
		keys[k] = true
	}
	for k := range keys {
		info, err := pool.InspectJob(ctx, c.rdb, c.pool, k)
		if errors.Is(err, pool.ErrJobNotFound) {
			info, err = nil, nil
		}
		if err != nil {
			return err
		}
		last, runs := r.Last[k], r.LastRuns[k]
		recorded := ""
		if info != nil && info.State == pool.JobRunning {
			recorded = r.Nodes[info.Node]
			if recorded == "" {
				return fmt.Errorf("job %s runs on node %s, which no process logged", k, info.Node)
			}
		}
		switch {
		case recorded != "" && (!runs || last.Proc != recorded):
			return fmt.Errorf("job %s: the pool records it running on %s (worker %s, generation %d), but its last handler event is %q on %q",
				k, recorded, info.Worker, info.Generation, last.Event, last.Proc)
		case recorded == "" && runs:
			state := "no record"
			if info != nil {
				state = string(info.State)
			}
			return fmt.Errorf("job %s last started on %s, but the pool says %s", k, last.Proc, state)
		}
	}
	return nil
}

// finish shuts the pool down and checks that nothing runs and no key of
// the pool is left. With stopAll it first proves that the records name the
// real owners: StopJob of every acknowledged key stops exactly the copy
// that runs.
func (c *cluster) finish(stopAll bool) {
	c.t.Helper()
	ctx := ctxFor(c.t, 60*time.Second)
	var keysLeft []string
	if stopAll {
		keysLeft = c.ackedKeys()
	}
	errs := make(chan error, len(keysLeft))
	sem := make(chan struct{}, 8)
	for _, k := range keysLeft {
		sem <- struct{}{}
		go func() {
			defer func() { <-sem }()
			errs <- c.stop(ctx, k)
		}()
	}
	for range keysLeft {
		if err := <-errs; err != nil && !isStopPanic(err) {
			c.t.Errorf("StopJob at the end: %v", err)
		}
	}
	r := c.report()
	require.Empty(c.t, r.Zombies, "jobs still run after their StopJob returned nil: the records named another owner")

	// The rest (and failed dispatches that went through) stop with the
	// pool.
	require.NoError(c.t, c.disp.Shutdown(ctx))
	for _, name := range c.live() {
		c.awaitExit(c.take(name))
	}
	r = c.report()
	require.Empty(c.t, r.Running, "jobs still run after Shutdown")
	require.Empty(c.t, r.ExitedHolding, "a process exited without stopping its jobs")
	var mu sync.Mutex
	var left []string
	for i := range c.shards {
		s, err := keys.New(keys.ShardTag(c.pool, i))
		require.NoError(c.t, err)
		pattern := s.Pattern()
		require.NoError(c.t, redisutil.EachMaster(ctx, c.rdb, func(ctx context.Context, rdb redis.Cmdable) error {
			iter := rdb.Scan(ctx, 0, pattern, 1000).Iterator()
			for iter.Next(ctx) {
				mu.Lock()
				left = append(left, iter.Val())
				mu.Unlock()
			}
			return iter.Err()
		}))
	}
	require.Empty(c.t, left, "the pool's keys outlived Shutdown")
}

func isStopPanic(err error) bool { return err != nil && strings.Contains(err.Error(), "panicked") }

// pick returns a random live process.
func (c *cluster) pick() string {
	names := c.live()
	return names[rand.IntN(len(names))]
}

// forgetAcked drops keys from the acknowledged set (Redis lost them).
func (c *cluster) forgetAcked(keys ...string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, k := range keys {
		delete(c.acked, k)
	}
}

// cpuTicks returns the user+system CPU time of a process, in clock ticks.
func cpuTicks(t *testing.T, pid int) int64 {
	t.Helper()
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	require.NoError(t, err)
	// Fields after the command name, which is in parentheses.
	f := strings.Fields(string(b[bytes.LastIndexByte(b, ')')+2:]))
	var utime, stime int64
	_, err = fmt.Sscan(f[11]+" "+f[12], &utime, &stime)
	require.NoError(t, err)
	return utime + stime
}
