package pool

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/shepherd-go/shepherd/internal/redistest"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// A failed call means what it says.

// DispatchJob calls that fail while Redis is frozen leave no running job
// once it thaws, however long it stayed frozen: the admission each sent
// sits in Redis's socket buffer and runs at the thaw, after the call gave
// up. Found by checks outside the suite (docs/ARCHITECTURE.md, failure
// modes: 17): the background withdrawal gave up after its own 5s while
// Redis was still frozen, and 1-3 of every such batch of jobs ran.
func TestFailedDispatchesDuringAFrozenRedisNeverRun(t *testing.T) {
	t.Parallel()
	s := redistest.Start(t)
	rdb := timedClient(t, s)
	name := redistest.Name(t)
	// A long TTL: the node's keep-alives stop during the freeze, and only
	// the dispatches are under test.
	n := addNode(t, rdb, name, WithWorkerTTL(time.Minute))
	rec := newRecorder()
	addWorkers(t, n, rec, 2)

	const outage = 7 * time.Second // longer than every timeout of a withdrawal attempt
	require.NoError(t, s.Freeze())
	t.Cleanup(func() { _ = s.Thaw() })
	frozen := time.Now()
	var keys []string
	for i := range 3 {
		key := fmt.Sprintf("frozen-%d", i)
		keys = append(keys, key)
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		err := n.DispatchJob(ctx, key, nil)
		cancel()
		require.ErrorIs(t, err, context.DeadlineExceeded, "%s", key)
	}
	<-time.After(time.Until(frozen.Add(outage))) // the fault lasts outage
	require.NoError(t, s.Thaw())

	ctx := testCtx(t, 30*time.Second)
	// Every withdrawal settles: it recorded its dispatch as withdrawn.
	require.Eventually(t, func() bool {
		n, err := rdb.ZCard(ctx, n.lay.withdrawn).Result()
		return err == nil && n == int64(len(keys))
	}, 20*time.Second, 20*time.Millisecond, "the withdrawals did not settle after the thaw")
	// Nothing runs, and nothing is recorded, and it stays so.
	settled := func() bool {
		jobs, err := rdb.HLen(ctx, n.lay.jobs).Result()
		if err != nil || jobs != 0 {
			return false
		}
		running := rec.runningKeys()
		for _, k := range keys {
			if running[k] > 0 {
				return false
			}
		}
		return true
	}
	require.Eventually(t, settled, 10*time.Second, 20*time.Millisecond, "a failed dispatch's job runs after the thaw")
	require.Never(t, func() bool { return !settled() }, time.Second, 20*time.Millisecond,
		"a failed dispatch's job started after the thaw")
	rec.mu.Lock()
	t.Logf("starts of the failed dispatches' jobs (each stopped by its withdrawal): %v", rec.starts)
	rec.mu.Unlock()
}

// A Start that takes longer than PendingJobTTL, every time: DispatchJob
// does not wait for ever (it did: the job was started, taken away,
// stopped and started again in a loop), but fails after maxSlowStarts
// attempts with a *StartError naming the cause, and leaves nothing
// behind.
func TestSlowStartFailsItsDispatch(t *testing.T) {
	t.Parallel()
	const pending = 500 * time.Millisecond
	n := addNode(t, srv.Client(), redistest.Name(t), WithPendingJobTTL(pending))
	rec := newRecorder()
	// Ignores its ctx, and lasts well past the janitor's detection of a
	// stuck Start (PendingJobTTL, then a pass every 250ms): with only
	// 300ms more, a janitor slowed by a loaded machine let one Start end
	// in time, and the dispatch succeeded (seen in a local CI run).
	rec.startDelay = pending + 900*time.Millisecond
	addWorkers(t, n, rec, 1)
	ctx := testCtx(t, 10*time.Second)
	began := time.Now()
	err := n.DispatchJob(ctx, "slow", nil)
	var se *StartError
	require.ErrorAs(t, err, &se)
	t.Logf("DispatchJob returned after %v: %v", time.Since(began), err)
	assert.Equal(t, "slow", se.Key)
	assert.Contains(t, se.Msg, "PendingJobTTL")
	assert.Contains(t, se.Msg, fmt.Sprint(maxSlowStarts))
	// Each attempt's Start returns in the end, and is stopped.
	require.Eventually(t, func() bool {
		keys, err := n.JobKeys(ctx)
		rec.mu.Lock()
		starts := rec.starts["slow"]
		rec.mu.Unlock()
		return err == nil && len(keys) == 0 && starts == maxSlowStarts && len(rec.runningKeys()) == 0
	}, 10*time.Second, 20*time.Millisecond, "the slow job was left recorded or running")
}

// A Start that honours its ctx and gives up at PendingJobTTL fails its
// dispatch at once, with a message that says why.
func TestStartPastItsDeadlineSaysSo(t *testing.T) {
	t.Parallel()
	n := addNode(t, srv.Client(), redistest.Name(t), WithPendingJobTTL(MinPendingJobTTL))
	addWorkers(t, n, startFunc(func(ctx context.Context, _ *Job) error {
		<-ctx.Done()
		return ctx.Err()
	}), 1)
	err := n.DispatchJob(testCtx(t, 10*time.Second), "k", nil)
	var se *StartError
	require.ErrorAs(t, err, &se)
	assert.Contains(t, se.Msg, "the Start handler did not return within PendingJobTTL (500ms)")
	assert.Contains(t, se.Msg, context.DeadlineExceeded.Error())
}

// startFunc is a JobHandler made of a Start function; Stop does nothing.
type startFunc func(ctx context.Context, job *Job) error

func (f startFunc) Start(ctx context.Context, job *Job) error { return f(ctx, job) }
func (startFunc) Stop(context.Context, string) error          { return nil }

// dropFirstAdmission is a go-redis hook that keeps the first admission of
// a DispatchJob from reaching Redis until its ctx ends, and keeps a copy:
// the test sends it later, as Redis would run a command that sat in its
// socket buffer (frozen) or in the network (slow) after the caller gave
// up.
type dropFirstAdmission struct {
	mu      sync.Mutex
	dropped []any // the command's arguments
}

func (*dropFirstAdmission) DialHook(next redis.DialHook) redis.DialHook { return next }
func (*dropFirstAdmission) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return next
}

func (d *dropFirstAdmission) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		args := cmd.Args()
		if len(args) > 1 && (args[1] == admitRouteScript.Hash()) {
			d.mu.Lock()
			first := d.dropped == nil
			if first {
				d.dropped = append([]any(nil), args...)
			}
			d.mu.Unlock()
			if first {
				<-ctx.Done()
				cmd.SetErr(ctx.Err())
				return ctx.Err()
			}
		}
		return next(ctx, cmd)
	}
}

// The admission of a failed DispatchJob that reaches Redis only after the
// call gave up and withdrew it does nothing. Before, the withdrawal found
// no job (NOTFOUND, "done"), and the late admission then started it.
func TestLateAdmissionOfAFailedDispatchIsRefused(t *testing.T) {
	t.Parallel()
	rdb := srv.NewClient()
	hook := &dropFirstAdmission{}
	rdb.AddHook(hook)
	n := addNode(t, rdb, redistest.Name(t))
	rec := newRecorder()
	addWorkers(t, n, rec, 1)
	ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
	err := n.DispatchJob(ctx, "late", nil)
	cancel()
	require.ErrorIs(t, err, context.DeadlineExceeded)

	tctx := testCtx(t, 20*time.Second)
	require.Eventually(t, func() bool {
		n, err := rdb.ZCard(tctx, n.lay.withdrawn).Result()
		return err == nil && n == 1
	}, 10*time.Second, 10*time.Millisecond, "the withdrawal did not settle")
	// Now the admission arrives.
	hook.mu.Lock()
	args := hook.dropped
	hook.mu.Unlock()
	require.NotNil(t, args)
	nkeys := args[2].(int)
	keys := make([]string, nkeys)
	for i := range keys {
		keys[i] = args[3+i].(string)
	}
	res, err := admitRouteScript.Eval(tctx, srv.Client(), keys, args[3+nkeys:]...).Result()
	require.NoError(t, err)
	t.Logf("the late admission returned %v", res)
	require.Never(t, func() bool {
		jobs, err := srv.Client().HLen(tctx, n.lay.jobs).Result()
		return err != nil || jobs != 0 || rec.runningKeys()["late"] > 0
	}, time.Second, 20*time.Millisecond, "the late admission of a failed dispatch created its job")
}
