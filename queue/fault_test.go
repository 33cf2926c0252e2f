package queue

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"

	"github.com/shepherd-go/shepherd/internal/redistest"
	"github.com/shepherd-go/shepherd/limit"
)

// A child is this test binary run again as a serving process, so that
// tests can kill and pause a real process.
const childEnv = "SHEPHERD_QUEUE_CHILD"

// runChild serves the queue named by the environment with a handler that
// sleeps (ignoring its ctx, as a stuck handler would; a payload of N
// makes a first attempt sleep N ms) and answers "child", logging at Info
// to stderr, until it is killed.
func runChild() int {
	ttl, _ := strconv.Atoi(os.Getenv("CHILD_TTL_MS"))
	workers, _ := strconv.Atoi(os.Getenv("CHILD_WORKERS"))
	sleep, _ := strconv.Atoi(os.Getenv("CHILD_SLEEP_MS"))
	rdb := redis.NewClient(&redis.Options{Addr: os.Getenv("CHILD_ADDR")})
	logger := slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelInfo}))
	ctx := context.Background()
	openOpts := []Option{WithTTL(time.Duration(ttl) * time.Millisecond), WithLogger(logger)}
	if os.Getenv("CHILD_TRACE") != "" {
		openOpts = append(openOpts, WithTracerProvider(sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(spanLogger{}))))
	}
	q, err := Open(ctx, rdb, os.Getenv("CHILD_QUEUE"), openOpts...)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	opts := []ServeOption{WithWorkers(workers)}
	if n, _ := strconv.Atoi(os.Getenv("CHILD_LIMIT")); n > 0 {
		fixed, err := limit.NewFixed(n)
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 1
		}
		opts = append(opts, WithConcurrencyLimit(fixed, 1))
	}
	_, err = q.Serve(func(ctx context.Context, t *Task) ([]byte, error) {
		d := time.Duration(sleep) * time.Millisecond
		if ms, err := strconv.Atoi(string(t.Payload)); err == nil && t.Attempt == 1 {
			d = time.Duration(ms) * time.Millisecond // a first attempt this long
		}
		time.Sleep(d)
		return []byte("child"), nil
	}, opts...)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	if ten := os.Getenv("CHILD_ACQUIRE"); ten != "" {
		if _, err := q.Acquire(ctx, ten); err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 1
		}
	}
	fmt.Println("ready")
	_, _ = io.Copy(io.Discard, os.Stdin) // until the parent goes away
	return 0
}

type child struct {
	cmd     *exec.Cmd
	stdin   io.WriteCloser
	logPath string
}

func startChild(t *testing.T, queue string, ttl time.Duration, workers int, sleep time.Duration, env ...string) *child {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), childEnv+"=1", "CHILD_ADDR="+srv.Addr(), "CHILD_QUEUE="+queue,
		fmt.Sprint("CHILD_TTL_MS=", ttl.Milliseconds()), fmt.Sprint("CHILD_WORKERS=", workers),
		fmt.Sprint("CHILD_SLEEP_MS=", sleep.Milliseconds()))
	cmd.Env = append(cmd.Env, env...)
	stdout, err := cmd.StdoutPipe()
	require.NoError(t, err)
	// A file, not a pipe: a child must never block on its log.
	logFile, err := os.Create(t.TempDir() + "/child.log")
	require.NoError(t, err)
	t.Cleanup(func() { _ = logFile.Close() })
	cmd.Stderr = logFile
	c := &child{cmd: cmd, logPath: logFile.Name()}
	c.stdin, err = cmd.StdinPipe()
	require.NoError(t, err)
	require.NoError(t, cmd.Start())
	t.Cleanup(func() {
		_ = cmd.Process.Signal(syscall.SIGCONT)
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
	})
	ready := make(chan bool, 1)
	go func() {
		sc := bufio.NewScanner(stdout)
		ready <- sc.Scan() && sc.Text() == "ready"
		_, _ = io.Copy(io.Discard, stdout)
	}()
	select {
	case ok := <-ready:
		require.True(t, ok, "child did not start: %v", c.log())
	case <-time.After(20 * time.Second):
		t.Fatalf("child did not start: %v", c.log())
	}
	return c
}

func (c *child) log() []string {
	b, _ := os.ReadFile(c.logPath)
	return strings.Split(strings.TrimSpace(string(b)), "\n")
}

func (c *child) count(s string) int {
	n := 0
	for _, l := range c.log() {
		if strings.Contains(l, s) {
			n++
		}
	}
	return n
}

// recovery submits inFlight tasks to a child, waits until the child runs
// all of them, applies fault to it, then serves the queue in this process
// and submits fresh tasks meanwhile: every task must complete here, with
// this process's answer, within TTL + 1s of the fault.
func recovery(t *testing.T, fault func(c *child), pause time.Duration) (*Queue, *child, []*Future) {
	const ttl = time.Second
	name := redistest.Name(t)
	q := open(t, name, WithTTL(ttl))
	c := startChild(t, name, ttl, 4, 1500*time.Millisecond)
	ctx := testCtx(t, 30*time.Second)
	var futures []*Future
	for i := 0; i < 4; i++ {
		f, err := q.Submit(ctx, nil, WithMaxAttempts(3))
		require.NoError(t, err)
		futures = append(futures, f)
	}
	require.Eventually(t, func() bool {
		st, err := q.Stats(ctx)
		return err == nil && st.InFlight == 4
	}, 10*time.Second, 5*time.Millisecond, "the child never took its tasks")

	faultAt := time.Now()
	fault(c)
	var done atomic.Int64
	serve(t, q, func(ctx context.Context, t *Task) ([]byte, error) {
		done.Add(1)
		return []byte("survivor"), nil
	}, WithWorkers(4))
	// Fresh tasks submitted during the fault run here at once: nothing
	// is routed to the paused process.
	for i := 0; i < 20; i++ {
		f, err := q.Submit(ctx, nil)
		require.NoError(t, err)
		futures = append(futures, f)
	}
	var latest time.Duration
	for _, f := range futures {
		res, err := wait(t, f, ttl+5*time.Second)
		require.NoError(t, err)
		assert.Equal(t, "survivor", string(res), "task %s", f.ID())
		latest = max(latest, time.Since(faultAt))
	}
	t.Logf("every task ran elsewhere %v after the fault (TTL %v)", latest, ttl)
	assert.LessOrEqual(t, latest, ttl+time.Second, "tasks were held hostage")
	if pause > 0 {
		time.Sleep(time.Until(faultAt.Add(pause)))
	}
	return q, c, futures
}

func TestKilledProcessTasksRunElsewhereWithinTTL(t *testing.T) {
	t.Parallel()
	recovery(t, func(c *child) { require.NoError(t, c.cmd.Process.Kill()) }, 0)
}

// A process paused for longer than every timeout (TTL 1s, the child's
// 1.5s handler, the 1s polls) holds nothing, and when it wakes its late
// outcomes are refused: the recorded outcome stays the survivor's.
func TestPausedProcessHoldsNoTaskAndItsLateOutcomesAreRefused(t *testing.T) {
	t.Parallel()
	q, c, futures := recovery(t, func(c *child) { require.NoError(t, c.cmd.Process.Signal(syscall.SIGSTOP)) }, 4*time.Second)
	require.NoError(t, c.cmd.Process.Signal(syscall.SIGCONT))
	// Each of its 4 attempts ends in one of two ways: its outcome is
	// refused ("came too late"), or the process learns first that it was
	// declared dead and drops the attempt ("abandoned=N").
	settled := func() bool {
		abandoned := 0
		for _, l := range c.log() {
			if i := strings.Index(l, "abandoned="); i >= 0 && strings.Contains(l, "was declared dead") {
				n, _ := strconv.Atoi(strings.Fields(l[i+len("abandoned="):])[0])
				abandoned += n
			}
		}
		return c.count("was declared dead") == 1 && c.count("came too late")+abandoned == 4
	}
	if !assert.Eventually(t, settled, 10*time.Second, 10*time.Millisecond) {
		t.Fatalf("the revived child did not learn it was declared dead and end its 4 attempts; its log:\n%s", strings.Join(c.log(), "\n"))
	}
	ctx := testCtx(t, 5*time.Second)
	for _, f := range futures[:4] {
		res, err := q.Result(ctx, f.ID())
		require.NoError(t, err)
		assert.Equal(t, "survivor", string(res), "a late outcome replaced the recorded one")
		info, err := q.Inspect(ctx, f.ID())
		require.NoError(t, err)
		assert.Equal(t, 2, info.Attempt, "the paused attempt counts as one")
	}
}

// A process with a concurrency limit of 2, paused past its TTL while it
// runs 2 tasks, gets its permits back for the attempts it lost: once
// thawed, it learns they were given away and, as their handlers return
// (these ignore their ctx, 1.5s on), runs its tasks again, within its
// limit. Permits kept by the lost attempts would leave it taking nothing,
// for ever.
func TestPausedProcessWithALimitGetsItsPermitsBack(t *testing.T) {
	t.Parallel()
	const ttl = time.Second
	name := redistest.Name(t)
	q := open(t, name, WithTTL(ttl)) // submits, and reaps the paused child
	c := startChild(t, name, ttl, 4, 300*time.Millisecond, "CHILD_LIMIT=2")
	ctx := testCtx(t, 30*time.Second)
	var futures []*Future
	for range 2 {
		f, err := q.Submit(ctx, []byte("5000"), WithMaxAttempts(3))
		require.NoError(t, err)
		futures = append(futures, f)
	}
	require.Eventually(t, func() bool {
		st, err := q.Stats(ctx)
		return err == nil && st.InFlight == 2
	}, 10*time.Second, 5*time.Millisecond, "the child never took its tasks")
	require.NoError(t, c.cmd.Process.Signal(syscall.SIGSTOP))
	paused := time.Now()
	// Longer than the TTL, the handlers and every poll: the child is
	// declared dead and its 2 tasks wait again, for it alone.
	require.Eventually(t, func() bool {
		st, err := q.Stats(ctx)
		return err == nil && st.InFlight == 0 && st.Available == 2
	}, 10*time.Second, 10*time.Millisecond, "the paused child's tasks were not given back")
	time.Sleep(time.Until(paused.Add(3500 * time.Millisecond)))
	for range 6 {
		f, err := q.Submit(ctx, nil, WithMaxAttempts(3))
		require.NoError(t, err)
		futures = append(futures, f)
	}
	thawed := time.Now()
	require.NoError(t, c.cmd.Process.Signal(syscall.SIGCONT))
	stop := make(chan struct{})
	var peak atomic.Int64
	go func() {
		for {
			select {
			case <-stop:
				return
			case <-time.After(5 * time.Millisecond):
			}
			if st, err := q.Stats(context.Background()); err == nil && st.InFlight > peak.Load() {
				peak.Store(st.InFlight)
			}
		}
	}()
	for _, f := range futures {
		res, err := wait(t, f, 15*time.Second)
		require.NoError(t, err)
		assert.Equal(t, "child", string(res))
	}
	close(stop)
	took := time.Since(thawed)
	t.Logf("8 tasks of 300ms at a limit of 2 done %v after the thaw; most in flight %d", took, peak.Load())
	assert.LessOrEqual(t, peak.Load(), int64(2), "the revived child ran beyond its limit")
	// The lost handlers' last 1.5s, then 4 rounds of 300ms.
	assert.Less(t, took, 5*time.Second, "the revived child was slow to run its tasks again")
	assert.Equal(t, 1, c.count("was declared dead"), "the child was not declared dead while paused")
}

// A dequeue whose reply is lost (the connection drops after Redis ran the
// script) leaves a task marked as running on a live process that never
// got it: the process finds and gives it back.
func TestTaskOfALostDequeueReplyIsGivenBack(t *testing.T) {
	t.Parallel()
	q := open(t, redistest.Name(t), WithTTL(time.Second))
	ctx := testCtx(t, 10*time.Second)
	f, err := q.Submit(ctx, []byte("x"))
	require.NoError(t, err)
	// The dequeue the process never heard back from.
	_, err = dequeueScript.Run(ctx, q.rdb, q.lay.common(q.lay.inflight(q.proc)), q.lay.commonArgs(q.proc, 1, promoteLimit)...).Result()
	require.NoError(t, err)
	info, err := q.Inspect(ctx, f.ID())
	require.NoError(t, err)
	require.Equal(t, StateActive, info.State)

	serve(t, q, echo, WithWorkers(1))
	res, err := wait(t, f, 5*time.Second)
	require.NoError(t, err)
	assert.Equal(t, "x#1", string(res), "the lost attempt is not counted")
}

// Submits that fail while Redis is frozen (their ctx ends first) never
// run: each is withdrawn behind its own Submit, and a Submit that reaches
// Redis after its withdrawal is refused there. The same ids can be
// submitted again afterwards.
func TestFailedSubmitsDuringAFrozenRedisNeverRun(t *testing.T) {
	t.Parallel()
	own := redistest.Start(t)
	ctx := testCtx(t, 60*time.Second)
	// A long TTL: the processes' keep-alives stop during the freeze, and
	// only the Submits are under test.
	q, err := Open(ctx, own.Client(), "frozen", WithTTL(time.Minute))
	require.NoError(t, err)
	defer func() { require.NoError(t, closeWithin(q)) }()
	var mu sync.Mutex
	ran := map[string]int{}
	_, err = q.Serve(func(ctx context.Context, t *Task) ([]byte, error) {
		mu.Lock()
		ran[t.ID]++
		mu.Unlock()
		return nil, nil
	}, WithWorkers(2))
	require.NoError(t, err)

	const outage = 7 * time.Second // longer than every timeout of a Submit's call
	require.NoError(t, own.Freeze())
	t.Cleanup(func() { _ = own.Thaw() })
	frozen := time.Now()
	ids := []string{"f0", "f1", "f2"}
	for _, id := range ids {
		sctx, cancel := context.WithTimeout(ctx, time.Second)
		_, err := q.Submit(sctx, nil, WithTaskID(id))
		cancel()
		require.ErrorIs(t, err, context.DeadlineExceeded, id)
	}
	time.Sleep(time.Until(frozen.Add(outage)))
	require.NoError(t, own.Thaw())

	require.Eventually(t, func() bool {
		n, err := own.Client().ZCard(ctx, q.lay.withdrawn).Result()
		return err == nil && n == int64(len(ids))
	}, 20*time.Second, 20*time.Millisecond, "the withdrawals did not settle after the thaw")
	require.Never(t, func() bool {
		mu.Lock()
		defer mu.Unlock()
		return len(ran) > 0
	}, 2*time.Second, 20*time.Millisecond, "a failed Submit's task ran")
	for _, id := range ids {
		_, err := q.Inspect(ctx, id)
		assert.ErrorIs(t, err, ErrTaskNotFound, id)
	}
	// Submitting the same ids again works: they run once each.
	for _, id := range ids {
		f, err := q.Submit(ctx, nil, WithTaskID(id))
		require.NoError(t, err)
		_, err = wait(t, f, 5*time.Second)
		require.NoError(t, err)
	}
	mu.Lock()
	defer mu.Unlock()
	for _, id := range ids {
		assert.Equal(t, 1, ran[id], id)
	}
}

// A Submit that reaches Redis after its withdrawal is refused there.
func TestLateSubmitAfterItsWithdrawalIsRefused(t *testing.T) {
	t.Parallel()
	q := open(t, redistest.Name(t))
	ctx := testCtx(t, 5*time.Second)
	res, err := withdrawScript.Run(ctx, q.rdb, q.lay.common(), q.lay.commonArgs("late", "nonce-1", withdrawnTTL.Milliseconds())...).Result()
	require.NoError(t, err)
	assert.Equal(t, "ABSENT", res)
	res, err = submitScript.Run(ctx, q.rdb, q.lay.common(), q.lay.commonArgs(q.proc, 100, "late", "p", "1", 1, 1000, 0, 1000, "nonce-1", "", "", "ff", 0, "", 0, "")...).Result()
	require.NoError(t, err)
	assert.Equal(t, []any{"WITHDRAWN"}, res)
	_, err = q.Inspect(ctx, "late")
	assert.ErrorIs(t, err, ErrTaskNotFound, "a withdrawn Submit wrote its task")
}

// A killed process's tenant tasks and Acquire slots give their capacity
// back within its TTL, and the capacity holds throughout.
func TestKilledProcessGivesBackTenantCapacity(t *testing.T) {
	t.Parallel()
	const ttl = time.Second
	name := redistest.Name(t)
	q := open(t, name, WithTTL(ttl), WithAcquireWait(10*time.Second))
	ctx := testCtx(t, 30*time.Second)
	require.NoError(t, q.SetTenant(ctx, "a", 3))
	c := startChild(t, name, ttl, 4, 10*time.Second, "CHILD_ACQUIRE=a")
	var futures []*Future
	for range 4 {
		f, err := q.Submit(ctx, nil, WithTenant("a"), WithMaxAttempts(3))
		require.NoError(t, err)
		futures = append(futures, f)
	}
	// One slot held by Acquire, two tasks running: the capacity of 3.
	require.Eventually(t, func() bool {
		st, err := q.Stats(ctx)
		return err == nil && st.InFlight == 2
	}, 10*time.Second, 5*time.Millisecond, "the child never took its tasks")
	assert.Never(t, func() bool {
		st, err := q.Stats(ctx)
		return err == nil && st.InFlight > 2
	}, 200*time.Millisecond, 10*time.Millisecond, "the child ran more than the capacity allows")
	assert.Equal(t, int64(3), tenantOf(t, q, "a").Load)

	faultAt := time.Now()
	require.NoError(t, c.cmd.Process.Kill())
	slot, err := q.Acquire(ctx, "a")
	require.NoError(t, err)
	t.Logf("a slot of the killed process came back %v after the kill (TTL %v)", time.Since(faultAt), ttl)
	assert.LessOrEqual(t, time.Since(faultAt), ttl+time.Second, "a dead process's slot was held hostage")
	require.NoError(t, slot.Release(ctx))

	p := newPeak()
	serve(t, q, func(ctx context.Context, t *Task) ([]byte, error) {
		p.enter("a")
		defer p.leave("a")
		time.Sleep(20 * time.Millisecond)
		return []byte("survivor"), nil
	}, WithWorkers(4))
	for _, f := range futures {
		res, err := wait(t, f, ttl+5*time.Second)
		require.NoError(t, err)
		assert.Equal(t, "survivor", string(res))
	}
	t.Logf("every task ran elsewhere %v after the kill", time.Since(faultAt))
	assert.LessOrEqual(t, p.peakOf("a"), 3)
	assert.Zero(t, tenantOf(t, q, "a").Load, "capacity left taken")
}

// A failed Submit whose task a worker of the same process took before the
// withdrawal reached Redis: the withdrawal deletes it (that worker never
// starts it), so the id is free for the caller's retry, which runs.
func TestWithdrawalOfATaskTakenByItsOwnProcess(t *testing.T) {
	t.Parallel()
	q := open(t, redistest.Name(t))
	ctx := testCtx(t, 10*time.Second)
	first, err := q.Submit(ctx, []byte("x"), WithTaskID("mine"))
	require.NoError(t, err)
	q.forget(first) // as its Submit had failed
	s := &Server{q: q, running: map[string]*run{}}
	tasks, _, err := s.dequeue(ctx, q.lay, 1)
	require.NoError(t, err)
	require.Len(t, tasks, 1, "taken by this process")
	nonce := storedTask(t, ctx, srv.Client(), q.lay, "mine")[fieldNonce]
	require.NotEmpty(t, nonce)
	res, err := withdrawScript.Run(ctx, q.rdb, q.lay.common(), q.lay.commonArgs("mine", nonce, withdrawnTTL.Milliseconds(), q.proc)...).Result()
	require.NoError(t, err)
	assert.Equal(t, "WITHDRAWN", res)
	_, err = q.Inspect(ctx, "mine")
	require.ErrorIs(t, err, ErrTaskNotFound)
	st, err := q.Stats(ctx)
	require.NoError(t, err)
	assert.Zero(t, st.InFlight+st.Available)
	n, err := srv.Client().SCard(ctx, q.lay.inflight(q.proc)).Result()
	require.NoError(t, err)
	assert.Zero(t, n)

	serve(t, q, echo, WithWorkers(1))
	f, err := q.Submit(ctx, []byte("again"), WithTaskID("mine"))
	require.NoError(t, err, "the id is free again")
	out, err := wait(t, f, 5*time.Second)
	require.NoError(t, err)
	assert.Equal(t, "again#1", string(out))
}

// Stop returns once its ctx ends (and a call timeout more) while Redis
// takes no end: a process that must shut down while Redis, or a shard,
// is down is not held back for ever. The task whose end was given up is
// not lost: once Redis is back, the process, still live (its lease far
// from running out), gives it back at its next keep-alive, and it runs
// again, elsewhere.
func TestStopReturnsWhileRedisIsDown(t *testing.T) {
	t.Parallel()
	s := redistest.Start(t, redistest.WithAOF())
	ctx := testCtx(t, 90*time.Second)
	name := redistest.Name(t)
	q, err := Open(ctx, s.NewClient(), name, WithTTL(20*time.Second), WithCallTimeout(time.Second))
	require.NoError(t, err)
	t.Cleanup(func() { _ = closeWithin(q) })
	started := make(chan struct{})
	release, free := gate(t)
	srv := serve(t, q, func(ctx context.Context, task *Task) ([]byte, error) {
		close(started)
		<-release
		return []byte("first"), nil
	}, WithWorkers(1))
	f, err := q.Submit(ctx, []byte("x"))
	require.NoError(t, err)
	awaitSignal(t, started, "started")
	require.NoError(t, s.Kill())
	free() // its end cannot be recorded

	stopped := make(chan error, 1)
	go func() {
		sctx, cancel := context.WithTimeout(context.Background(), time.Second)
		defer cancel()
		stopped <- srv.Stop(sctx)
	}()
	select {
	case <-stopped:
	case <-time.After(15 * time.Second):
		t.Fatal("Stop did not return while Redis was down")
	}

	require.NoError(t, s.Restart())
	other, err := Open(ctx, s.NewClient(), name)
	require.NoError(t, err)
	t.Cleanup(func() { _ = closeWithin(other) })
	serve(t, other, func(context.Context, *Task) ([]byte, error) { return []byte("again"), nil }, WithWorkers(1))
	require.Eventually(t, func() bool {
		res, err := other.Result(ctx, f.ID())
		return err == nil && string(res) == "again"
	}, 30*time.Second, 20*time.Millisecond, "the task whose end was given up did not run again")
}

// A take of a failed Submit's task by this process may reach its worker
// only after the withdrawal deleted the task (withdrawScript found it
// taken here: WITHDRAWN). The worker must still not start it: after a
// freeze, Redis runs the Submit, the take and the withdrawal in a row,
// and their replies come on three connections in any order. A Submit of
// the same id afterwards is a new task, which runs.
func TestATakeThatComesAfterItsWithdrawalDoesNotStart(t *testing.T) {
	t.Parallel()
	q := open(t, redistest.Name(t))
	ctx := testCtx(t, 10*time.Second)
	f, err := q.Submit(ctx, nil, WithTaskID("x"))
	require.NoError(t, err)
	v, err := readTaskNow(ctx, q.rdb, q.known()[f.shard], "x", fieldNonce)
	require.NoError(t, err)
	nonce, ok := v[0].(string)
	require.True(t, ok, "the task's nonce")
	q.forget(f)
	q.withdraw(&submitReq{f: f, nonce: nonce, shard: f.shard})
	require.Eventually(t, func() bool {
		_, err := q.Inspect(ctx, "x")
		return errors.Is(err, ErrTaskNotFound)
	}, 5*time.Second, 5*time.Millisecond, "the withdrawal deleted the task")
	q.withdrawals.Wait() // the withdrawal's outcome is noted (no other runs here)
	assert.True(t, q.maybeWithdrawn(ctx, f.shard, "x"), "a late take of the withdrawn task would start it")

	_, err = q.Submit(ctx, nil, WithTaskID("x"))
	require.NoError(t, err)
	assert.False(t, q.maybeWithdrawn(ctx, f.shard, "x"), "the new Submit's task is not withdrawn")
}

// A keep-alive that Redis did not answer says so, so that
// member.KeepAlive tries it again soon instead of a period later (a
// Redis outage of a third of the TTL would otherwise get a live process
// declared dead).
func TestAFailedKeepAliveSaysSo(t *testing.T) {
	t.Parallel()
	own := redistest.Start(t)
	ctx := testCtx(t, 30*time.Second)
	q, err := Open(ctx, own.Client(), "beats", WithTTL(time.Minute))
	require.NoError(t, err)
	defer func() { require.NoError(t, closeWithin(q)) }()
	assert.True(t, q.keepAlive(ctx), "a beat Redis answered")
	require.NoError(t, own.Freeze())
	short, cancel := context.WithTimeout(ctx, 300*time.Millisecond)
	ok := q.keepAlive(short)
	cancel()
	require.NoError(t, own.Thaw())
	assert.False(t, ok, "a beat Redis did not answer")
	assert.True(t, q.keepAlive(ctx), "a beat after the thaw")
}
