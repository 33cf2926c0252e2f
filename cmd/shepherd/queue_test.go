package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"regexp"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/shepherd-go/shepherd/internal/redistest"
	"github.com/shepherd-go/shepherd/limit"
	"github.com/shepherd-go/shepherd/queue"
)

func runCmd(args ...string) (int, string, string) {
	var out, errOut bytes.Buffer
	code := run(args, &out, &errOut)
	return code, out.String(), errOut.String()
}

// openQueue opens a queue named after the test on the shared server,
// with a ctx of 30s; both end with the test.
func openQueue(t *testing.T, opts ...queue.Option) (string, context.Context, *queue.Queue) {
	t.Helper()
	name := redistest.Name(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	t.Cleanup(cancel)
	q, err := queue.Open(ctx, srv.Client(), name, opts...)
	require.NoError(t, err)
	t.Cleanup(func() { _ = q.Close(context.Background()) })
	return name, ctx, q
}

// deadAndDelayed serves q with a handler that fails every task for good
// after took, and leaves it one dead letter (t1) and one delayed task (t2).
func deadAndDelayed(t *testing.T, ctx context.Context, q *queue.Queue, took time.Duration) {
	t.Helper()
	_, err := q.Serve(func(ctx context.Context, t *queue.Task) ([]byte, error) {
		time.Sleep(took)
		return nil, queue.Permanent(errors.New("bad " + string(t.Payload)))
	}, queue.WithWorkers(1))
	require.NoError(t, err)
	f, err := q.Submit(ctx, []byte("x"), queue.WithTaskID("t1"))
	require.NoError(t, err)
	_, err = f.Wait(ctx)
	require.ErrorIs(t, err, queue.ErrFailed)
	_, err = q.Submit(ctx, []byte("later"), queue.WithTaskID("t2"), queue.WithDelay(time.Hour))
	require.NoError(t, err)
}

func TestQueueCommands(t *testing.T) {
	t.Parallel()
	name, ctx, q := openQueue(t)
	deadAndDelayed(t, ctx, q, 0)

	code, out, errOut := runCmd("queue", "stats", "-queue", name, "-redis", srv.Addr())
	require.Equal(t, exitOK, code, errOut)
	assert.Contains(t, out, "0 available, 1 delayed, 0 retrying, 0 in flight, 1 dead")
	assert.Contains(t, out, "workers: 0 busy of 1, in 1 processes")

	code, out, errOut = runCmd("queue", "stats", "-queue", name, "-redis", srv.Addr(), "-json")
	require.Equal(t, exitOK, code, errOut)
	var st queue.Stats
	require.NoError(t, json.Unmarshal([]byte(out), &st))
	assert.EqualValues(t, 1, st.Dead)

	code, out, errOut = runCmd("queue", "ls", "-queue", name, "-state", "delayed", "-redis", srv.Addr())
	require.Equal(t, exitOK, code, errOut)
	assert.Contains(t, out, "t2")
	code, out, errOut = runCmd("queue", "dead", "-queue", name, "-redis", srv.Addr(), "-json")
	require.Equal(t, exitOK, code, errOut)
	var rows []taskRow
	require.NoError(t, json.Unmarshal([]byte(out), &rows))
	require.Len(t, rows, 1)
	assert.Equal(t, "t1", rows[0].ID)
	assert.Equal(t, "bad x", rows[0].LastError)

	// Flags after the ids count (they go to the Redis named).
	code, out, errOut = runCmd("queue", "replay", "-queue", name, "t1", "nope", "-redis", srv.Addr())
	assert.Equal(t, exitError, code, errOut)
	assert.Contains(t, out, "t1: replayed")
	assert.Contains(t, out, "nope: queue: task not found")
	require.Eventually(t, func() bool {
		st, err := q.Stats(ctx)
		return err == nil && st.Dead == 1 && st.Available == 0 && st.InFlight == 0
	}, 5*time.Second, 10*time.Millisecond, "the replayed task did not fail again")

	code, out, errOut = runCmd("queue", "cancel", "-queue", name, "-redis", srv.Addr(), "t2")
	require.Equal(t, exitOK, code, errOut)
	assert.Contains(t, out, "t2: cancelled")
	_, err := q.Result(ctx, "t2")
	assert.ErrorIs(t, err, queue.ErrCancelled)

	f3, err := q.Submit(ctx, []byte("y"), queue.WithTaskID("t3"))
	require.NoError(t, err)
	<-f3.Done()
	code, out, errOut = runCmd("queue", "delete-dead", "-queue", name, "-redis", srv.Addr(), "t3", "t2")
	assert.Equal(t, exitError, code, errOut)
	assert.Contains(t, out, "t3: deleted")
	assert.Contains(t, out, "t2: queue: task not found", "a cancelled task is no dead letter")
	_, err = q.Inspect(ctx, "t3")
	assert.ErrorIs(t, err, queue.ErrTaskNotFound)

	code, _, errOut = runCmd("queue", "purge-dead", "-queue", name, "-redis", srv.Addr())
	assert.Equal(t, exitUsage, code, "purge-dead without a yes")
	assert.Contains(t, errOut, "not confirmed")
	code, out, errOut = runCmd("queue", "purge-dead", "-queue", name, "-redis", srv.Addr(), "-yes")
	require.Equal(t, exitOK, code, errOut)
	assert.Contains(t, out, "deleted 1 dead letters")

	st2, err := q.Stats(ctx)
	require.NoError(t, err)
	assert.Len(t, st2.Processes, 1, "the commands registered no process")
}

func TestQueueCommandErrors(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		args []string
		code int
		want string
	}{
		{[]string{"queue"}, exitUsage, "shepherd queue [command]"},
		{[]string{"queue", "nope"}, exitUsage, `unknown command "nope"`},
		{[]string{"queue", "stats"}, exitUsage, "-queue is required"},
		{[]string{"queue", "replay", "-queue", "q"}, exitUsage, "missing task id"},
		{[]string{"queue", "stats", "-queue", "q", "extra"}, exitUsage, "unexpected arguments"},
		{[]string{"queue", "ls", "-queue", "q", "-limit", "0"}, exitUsage, "-limit must be at least 1"},
		{[]string{"queue", "stats", "-queue", "a}b", "-redis", srv.Addr()}, exitUsage, "invalid option"},
		{[]string{"queue", "stats", "-queue", "missing-queue", "-redis", srv.Addr()}, exitError, `queue "missing-queue" not found`},
		{[]string{"queue", "ls", "-queue", "missing-queue", "-redis", srv.Addr(), "-state", "bogus"}, exitError, `not found`},
		{[]string{"queue", "drain", "-queue", "missing-queue", "-redis", srv.Addr(), "-yes"}, exitError, `queue "missing-queue" not found`},
		{[]string{"queue", "drain", "-queue", "q", "extra"}, exitUsage, "unexpected arguments"},
	} {
		code, _, errOut := runCmd(tc.args...)
		assert.Equal(t, tc.code, code, "%v: %s", tc.args, errOut)
		assert.True(t, strings.Contains(errOut, tc.want), "%v: %s", tc.args, errOut)
	}
	assert.Empty(t, srv.Client().Keys(context.Background(), "shepherd:{missing-queue}:*").Val(), "a command created the queue")
}

func TestTenantsCommands(t *testing.T) {
	t.Parallel()
	name, ctx, q := openQueue(t)
	r := func(args ...string) (int, string, string) {
		return runCmd(append(append([]string{"tenants"}, args...), "-queue", name, "-redis", srv.Addr())...)
	}

	code, out, errOut := r("set", "acme", "3")
	require.Equal(t, exitOK, code, errOut)
	assert.Equal(t, "acme: capacity 3\n", out)
	_, err := q.Submit(ctx, []byte("x"), queue.WithTenant("acme"))
	require.NoError(t, err)
	code, out, errOut = r("ls")
	require.Equal(t, exitOK, code, errOut)
	assert.Contains(t, out, "TENANT")
	assert.Regexp(t, `acme\s+3\s+0\s+1\s+1`, out)
	code, out, errOut = r("ls", "-json")
	require.Equal(t, exitOK, code, errOut)
	var ts []queue.TenantInfo
	require.NoError(t, json.Unmarshal([]byte(out), &ts))
	require.Len(t, ts, 1)
	assert.Equal(t, queue.TenantInfo{ID: "acme", Capacity: 3, Waiting: 1, Unfinished: 1}, ts[0])

	code, out, _ = r("rm", "acme", "nobody")
	assert.Equal(t, exitError, code)
	assert.Contains(t, out, "acme: removed")
	assert.Contains(t, out, "nobody: queue: unknown tenant")
	code, out, errOut = r("ls")
	require.Equal(t, exitOK, code, errOut)
	assert.Contains(t, out, "acme (removed)")

	code, out, errOut = r("untenanted", "5")
	require.Equal(t, exitOK, code, errOut)
	assert.Equal(t, "untenanted tasks: capacity 5\n", out)
	code, out, errOut = r("ls")
	require.Equal(t, exitOK, code, errOut)
	assert.Regexp(t, `\(untenanted\)\s+5\s+0`, out)
	code, out, errOut = r("untenanted", "none")
	require.Equal(t, exitOK, code, errOut)
	assert.Equal(t, "untenanted tasks: no cap\n", out)

	for _, bad := range [][]string{{"set", "acme"}, {"set", "acme", "x"}, {"set", "acme", "-1"}, {"rm"}, {"ls", "extra"}, {"nope"},
		{"untenanted"}, {"untenanted", "x"}} {
		code, _, errOut = r(bad...)
		assert.NotEqual(t, exitOK, code, "%v: %s", bad, errOut)
	}
	code, _, errOut = runCmd("tenants", "ls", "-queue", "no-such-queue-"+name, "-redis", srv.Addr())
	assert.Equal(t, exitError, code)
	assert.Contains(t, errOut, "not found")
}

// TestQueueStatsShowsTheLimit: a process serving in a partition of a
// shared limit shows its limit, partition and drops.
func TestQueueStatsShowsTheLimit(t *testing.T) {
	t.Parallel()
	name, ctx, q := openQueue(t, queue.WithTTL(time.Second))
	fixed, err := limit.NewFixed(3)
	require.NoError(t, err)
	lim, err := queue.NewLimit(fixed, limit.WithPartition("live", 0.9), limit.WithPartition("batch", 0.1))
	require.NoError(t, err)
	var once atomic.Bool
	_, err = q.Serve(func(ctx context.Context, t *queue.Task) ([]byte, error) {
		if once.CompareAndSwap(false, true) {
			return nil, queue.RetryLater(time.Millisecond, errors.New("429"))
		}
		return nil, nil
	}, queue.WithWorkers(2), queue.WithLimit(lim, "live"))
	require.NoError(t, err)
	f, err := q.Submit(ctx, []byte("x"))
	require.NoError(t, err)
	_, err = f.Wait(ctx)
	require.NoError(t, err)
	require.Eventually(t, func() bool {
		code, out, _ := runCmd("queue", "stats", "-queue", name, "-redis", srv.Addr())
		return code == exitOK && strings.Contains(out, "LIMIT  PARTITION  DROPS") &&
			regexp.MustCompile(`\s2\s+0\s+2\s+live\s+1\s`).MatchString(out)
	}, 10*time.Second, 20*time.Millisecond, "stats do not show limit 2 (the workers), partition live, 1 drop")
}

// TestQueueDrainCommand: "queue drain" asks for a yes, then switches the
// serving process to drain: stats shows its mode, and it stops once its
// task is done.
func TestQueueDrainCommand(t *testing.T) {
	t.Parallel()
	name, ctx, q := openQueue(t)
	started, release := make(chan struct{}, 1), make(chan struct{})
	t.Cleanup(func() { // before the queue closes, should the test fail first
		select {
		case <-release:
		default:
			close(release)
		}
	})
	s, err := q.Serve(func(ctx context.Context, t *queue.Task) ([]byte, error) {
		started <- struct{}{}
		select {
		case <-release:
		case <-ctx.Done():
		}
		return nil, nil
	}, queue.WithWorkers(1))
	require.NoError(t, err)
	_, err = q.Submit(ctx, []byte("x"))
	require.NoError(t, err)
	select {
	case <-started:
	case <-time.After(5 * time.Second):
		t.Fatal("the task never started")
	}
	// The process's row: its mode and 1 worker.
	showsMode := func(mode string) {
		t.Helper()
		row := regexp.MustCompile(regexp.QuoteMeta(q.Process()) + `\s.*\s` + mode + `\s+1\s+\d+\s`)
		require.EventuallyWithT(t, func(c *assert.CollectT) {
			code, out, errOut := runCmd("queue", "stats", "-queue", name, "-redis", srv.Addr())
			require.Equal(c, exitOK, code, errOut)
			assert.Regexp(c, `PID\s+MODE\s+WORKERS`, out)
			assert.Regexp(c, row, out)
		}, 10*time.Second, 20*time.Millisecond, "stats do not show the process in mode %s", mode)
	}
	showsMode("serve")

	code, _, errOut := runCmd("queue", "drain", "-queue", name, "-redis", srv.Addr())
	assert.Equal(t, exitUsage, code, "drain without a yes")
	assert.Contains(t, errOut, "not confirmed")
	assert.Equal(t, queue.ModeServe, s.Mode(), "drained without a yes")

	code, out, errOut := runCmd("queue", "drain", "-queue", name, "-redis", srv.Addr(), "-yes")
	require.Equal(t, exitOK, code, errOut)
	assert.Equal(t, "asked 1 processes to drain\n", out)
	showsMode("drain")
	assert.Equal(t, queue.ModeDrain, s.Mode())
	close(release)
	select {
	case <-s.Done():
	case <-time.After(10 * time.Second):
		t.Fatal("the drained server did not stop")
	}
}

// TestQueueInspect: queue inspect shows a task's state, tenant, attempts
// with their errors and a panic's stack, times, progress and result; an unknown id
// is an error naming it.
func TestQueueInspect(t *testing.T) {
	t.Parallel()
	name, ctx, q := openQueue(t)
	c, err := queue.NewClient(srv.Client(), name)
	require.NoError(t, err)
	require.NoError(t, c.SetTenant(ctx, "acme", 2))
	var calls atomic.Int32
	_, err = q.Serve(func(ctx context.Context, t *queue.Task) ([]byte, error) {
		switch calls.Add(1) {
		case 1:
			return nil, errors.New("downstream said no")
		case 2:
			var m map[string]int
			m["boom"]++ // panics: a nil map
		}
		if err := t.Progress(ctx, 40, "page 4 of 10"); err != nil {
			return nil, err
		}
		return []byte("done " + string(t.Payload)), nil
	}, queue.WithWorkers(1), queue.WithBackoff(time.Millisecond, time.Millisecond))
	require.NoError(t, err)
	f, err := q.Submit(ctx, []byte("p1"), queue.WithTaskID("task-1"), queue.WithTenant("acme"),
		queue.WithMaxAttempts(3), queue.WithTimeout(7*time.Second), queue.WithDedup("order-7", time.Minute))
	require.NoError(t, err)
	res, err := f.Wait(ctx)
	require.NoError(t, err)
	require.Equal(t, "done p1", string(res))

	code, out, errOut := runCmd("queue", "inspect", "-queue", name, "-redis", srv.Addr(), "task-1")
	require.Equal(t, exitOK, code, errOut)
	for _, want := range []string{`id:\s+task-1`, `state:\s+done`, `tenant:\s+acme`, `dedup key:\s+order-7\n`, `attempt:\s+3 of 3`, `timeout:\s+7s`,
		`submitted:\s+\d{4}-\d\d-\d\dT\S+Z`, `finished:\s+\d{4}-\d\d-\d\dT\S+Z`, `payload:\s+-\n`,
		`result:\s+7 bytes "done p1"`, `progress:\s+40 "page 4 of 10" \(attempt 3, at \d{4}-\d\d-\d\dT\S+Z\)\n`, `errors:\s+2`, `attempt 1 at \S+Z: downstream said no`,
		`attempt 2 at \S+Z: panic: assignment to entry in nil map`, `\n    .*TestQueueInspect`} {
		assert.Regexp(t, regexp.MustCompile(want), out)
	}

	code, out, errOut = runCmd("queue", "inspect", "-queue", name, "-redis", srv.Addr(), "-json", "task-1")
	require.Equal(t, exitOK, code, errOut)
	var got struct {
		ID          string  `json:"id"`
		State       string  `json:"state"`
		Tenant      string  `json:"tenant"`
		Attempt     int     `json:"attempt"`
		MaxAttempts int     `json:"max_attempts"`
		TimeoutMS   float64 `json:"timeout_ms"`
		Submitted   string  `json:"submitted"`
		Finished    string  `json:"finished"`
		Result      []byte  `json:"result"`
		Progress    *struct {
			Value   float64 `json:"value"`
			Message string  `json:"message"`
			Attempt int     `json:"attempt"`
			At      string  `json:"at"`
		} `json:"progress"`
		Errors []struct {
			Attempt int    `json:"attempt"`
			Err     string `json:"err"`
			At      string `json:"at"`
			Stack   string `json:"stack"`
		} `json:"errors"`
	}
	checkJSONStyle(t, "queue inspect", out)
	require.NoError(t, json.Unmarshal([]byte(out), &got))
	assert.Equal(t, "task-1", got.ID)
	assert.Equal(t, "done", got.State)
	assert.Equal(t, "acme", got.Tenant)
	assert.Equal(t, 3, got.Attempt)
	assert.Equal(t, 3, got.MaxAttempts)
	assert.Equal(t, 7000.0, got.TimeoutMS)
	assert.Equal(t, "done p1", string(got.Result))
	if assert.NotNil(t, got.Progress, out) {
		assert.Equal(t, 40.0, got.Progress.Value)
		assert.Equal(t, "page 4 of 10", got.Progress.Message)
		assert.Equal(t, 3, got.Progress.Attempt)
		assert.Regexp(t, `^\d{4}-\d\d-\d\dT\S+Z$`, got.Progress.At)
	}
	require.Len(t, got.Errors, 2)
	assert.Equal(t, "downstream said no", got.Errors[0].Err)
	assert.Empty(t, got.Errors[0].Stack)
	assert.Contains(t, got.Errors[1].Err, "panic: ")
	assert.Contains(t, got.Errors[1].Stack, "TestQueueInspect")
	assert.NotEmpty(t, got.Errors[1].At)

	code, out, errOut = runCmd("queue", "inspect", "-queue", name, "-redis", srv.Addr(), "no-such-task")
	assert.Equal(t, exitError, code)
	assert.Empty(t, out)
	assert.Contains(t, errOut, "task not found")
	assert.Contains(t, errOut, `"no-such-task"`)

	code, _, errOut = runCmd("queue", "inspect", "-queue", name, "-redis", srv.Addr())
	assert.Equal(t, exitUsage, code, "no id")
	assert.Contains(t, errOut, "want one task id")
}

// queue ls lists every state the dashboard does, done and cancelled too,
// with when each finished, and says so when a state has no task.
func TestQueueListsEveryState(t *testing.T) {
	t.Parallel()
	name, ctx, q := openQueue(t)
	_, err := q.Serve(func(ctx context.Context, t *queue.Task) ([]byte, error) { return []byte("ok"), nil }, queue.WithWorkers(1))
	require.NoError(t, err)
	f, err := q.Submit(ctx, []byte("x"), queue.WithTaskID("ok1"))
	require.NoError(t, err)
	_, err = f.Wait(ctx)
	require.NoError(t, err)
	_, err = q.Submit(ctx, nil, queue.WithTaskID("c1"), queue.WithDelay(time.Hour))
	require.NoError(t, err)
	require.NoError(t, q.Cancel(ctx, "c1"))

	for state, id := range map[string]string{"done": "ok1", "cancelled": "c1"} {
		code, out, errOut := runCmd("queue", "ls", "-queue", name, "-state", state, "-redis", srv.Addr())
		require.Equal(t, exitOK, code, errOut)
		assert.Contains(t, out, id, state)
		assert.Contains(t, out, "FINISHED", state)
		code, out, errOut = runCmd("queue", "ls", "-queue", name, "-state", state, "-redis", srv.Addr(), "-json")
		require.Equal(t, exitOK, code, errOut)
		var rows []taskRow
		require.NoError(t, json.Unmarshal([]byte(out), &rows))
		require.Len(t, rows, 1, state)
		assert.Equal(t, id, rows[0].ID)
		assert.False(t, rows[0].Finished.IsZero(), state)
	}
	code, out, errOut := runCmd("queue", "ls", "-queue", name, "-redis", srv.Addr())
	require.Equal(t, exitOK, code, errOut)
	assert.Equal(t, "no task is waiting in queue "+name+"\n", out)
	code, out, errOut = runCmd("queue", "ls", "-queue", name, "-state", "dead", "-redis", srv.Addr(), "-json")
	require.Equal(t, exitOK, code, errOut)
	assert.Equal(t, "[]\n", out, "JSON says empty as an empty array")
	code, _, errOut = runCmd("queue", "ls", "-queue", name, "-state", "finished", "-redis", srv.Addr())
	assert.Equal(t, exitUsage, code)
	assert.Contains(t, errOut, "-state must be waiting, delayed, retry, active, done, cancelled or dead")
}
