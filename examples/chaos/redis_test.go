package chaos

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/shepherd-go/shepherd/internal/redistest"
	"github.com/shepherd-go/shepherd/pool"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// Redis SIGKILLed and restarted with AOF (appendfsync always) while jobs
// are dispatched: every acknowledged job runs afterwards, exactly once.
func TestChaosRedisRestartAOF(t *testing.T) {
	t.Parallel()
	c := newCluster(t, 3, []redistest.Option{redistest.WithAOF()})
	c.dispatchN("before", 100)
	phase := faultPhase(4 * time.Second)
	ctx, cancel := context.WithTimeout(context.Background(), phase)
	defer cancel()
	done := make(chan [2]int, 1)
	go func() {
		ok, failed := c.churn(ctx, "during", 4, 0)
		done <- [2]int{ok, failed}
	}()
	restarts := 0
	every := time.NewTicker(max(phase/3, time.Second))
	defer every.Stop()
loop:
	for {
		select {
		case <-ctx.Done():
			break loop
		case <-every.C:
			require.NoError(t, c.srv.Kill())
			require.NoError(t, c.srv.Restart())
			restarts++
		}
	}
	res := <-done
	r := c.settle(3*workerTTL + 15*time.Second)
	t.Logf("%d Redis restarts; DispatchJob ok %d, failed %d during them\n%s", restarts, res[0], res[1], r.Summary())
	require.Positive(t, restarts)
	c.finish(false)
}

// Redis SIGKILLed and restarted without persistence: it lost everything.
// The nodes rejoin, the lost jobs' copies stop, new dispatches work, and
// no goroutine spins on errors.
func TestChaosRedisRestartWithoutPersistence(t *testing.T) {
	t.Parallel()
	c := newCluster(t, 2, nil)
	c.dispatchN("old", 40)
	c.settle(10 * time.Second)
	before, err := c.log.Read(ctxFor(t, 10*time.Second))
	require.NoError(t, err)
	old := c.ackedKeys()

	require.NoError(t, c.srv.Kill())
	require.NoError(t, c.srv.Restart())
	c.forgetAcked(old...)
	start := time.Now()
	ctx := ctxFor(t, 60*time.Second)
	require.Eventually(t, func() bool {
		dctx, cancel := context.WithTimeout(ctx, 2*time.Second)
		defer cancel()
		return c.dispatch(dctx, fmt.Sprintf("fresh-%d", time.Now().UnixNano())) == nil
	}, 30*time.Second, 100*time.Millisecond, "no dispatch works after the restart")
	t.Logf("first dispatch after the restart succeeded after %v", time.Since(start))
	c.dispatchN("fresh", 20)

	// Every worker re-registered, and the jobs Redis forgot no longer run.
	require.Eventually(t, func() bool {
		st, err := c.disp.Stats(ctx)
		if err != nil || len(st.Workers) != 6 {
			return false
		}
		for _, w := range st.Workers {
			if !w.Healthy {
				return false
			}
		}
		return true
	}, 20*time.Second, 50*time.Millisecond, "the workers did not rejoin")
	var r *Report
	require.Eventually(t, func() bool {
		after, err := c.log.Read(ctx)
		if err != nil {
			return false
		}
		r = Check(append(append([]Entry(nil), before...), after...))
		for k := range r.Running {
			if strings.HasPrefix(k, "old-") {
				return false
			}
		}
		// DispatchJob returns once the job is admitted; its Start may
		// still be on the way.
		for _, k := range c.ackedKeys() {
			if len(r.Running[k]) != 1 {
				return false
			}
		}
		return len(r.Duplicates) == 0
	}, 20*time.Second, 50*time.Millisecond, "jobs that Redis forgot still run, or a fresh job does not run exactly once")
	require.NoError(t, c.recordsAgree(r))
	for _, k := range c.ackedKeys() {
		require.Len(t, r.Running[k], 1, "fresh job %s", k)
	}

	// Idle now: no loop may spin on errors. A node idles at about 1% of a
	// core (keep-alives, janitor); 30% means something spins.
	const window = 2 * time.Second
	pids := map[string]int{}
	ticks := map[string]int64{}
	for _, name := range c.live() {
		pids[name] = c.get(name).cmd.Process.Pid
		ticks[name] = cpuTicks(t, pids[name])
	}
	<-time.After(window) // a measurement window, not synchronization
	for name, pid := range pids {
		used := cpuTicks(t, pid) - ticks[name]
		t.Logf("%s used %d CPU ticks in %v after recovery", name, used, window)
		assert.Less(t, used, int64(30*window/time.Second), "%s spins", name)
	}
	c.finish(true)
}

// Redis unavailable (SIGSTOPped: connections hang, nothing is refused) for
// -chaos.outage: every call with a deadline returns an error by then, and
// everything resumes afterwards.
func TestChaosRedisUnavailable(t *testing.T) {
	t.Parallel()
	c := newCluster(t, 3, nil)
	c.dispatchN("steady", 60)
	c.settle(10 * time.Second)
	acked := c.ackedKeys()

	c.disp2 = c.newClient()
	const deadline = 300 * time.Millisecond
	const slack = 500 * time.Millisecond
	var unknown []string
	calls := []struct {
		name string
		call func(ctx context.Context, i int) error
	}{
		{"DispatchJob", func(ctx context.Context, i int) error {
			k := fmt.Sprintf("outage-%d", i)
			unknown = append(unknown, k)
			return c.disp.DispatchJob(ctx, k, nil)
		}},
		{"StopJob", func(ctx context.Context, i int) error {
			k := acked[i%len(acked)]
			unknown = append(unknown, k)
			return c.disp.StopJob(ctx, k)
		}},
		{"NotifyWorker", func(ctx context.Context, i int) error {
			return c.disp.NotifyWorker(ctx, acked[i%len(acked)], []byte("hi"))
		}},
		{"JobKeys", func(ctx context.Context, _ int) error { _, err := c.disp.JobKeys(ctx); return err }},
		{"Stats", func(ctx context.Context, _ int) error { _, err := c.disp.Stats(ctx); return err }},
		{"AddNode", func(ctx context.Context, _ int) error {
			n, err := pool.AddNode(ctx, c.disp2, c.pool, pool.WithClientOnly())
			if err == nil {
				_ = n.Close(context.Background())
			}
			return err
		}},
	}
	outage := *chaosOutage
	require.NoError(t, c.srv.Freeze())
	frozenAt := time.Now()
	var worst time.Duration
	calls_ := 0
	for i := 0; time.Since(frozenAt) < outage; i++ {
		for _, cl := range calls {
			ctx, cancel := context.WithTimeout(context.Background(), deadline)
			t0 := time.Now()
			err := cl.call(ctx, i)
			took := time.Since(t0)
			cancel()
			calls_++
			worst = max(worst, took)
			assert.Error(t, err, "%s succeeded while Redis was frozen", cl.name)
			assert.LessOrEqual(t, took, deadline+slack, "%s returned %v after its %v deadline (%v)", cl.name, took, deadline, err)
		}
	}
	require.NoError(t, c.srv.Thaw())
	t.Logf("Redis frozen %v: %d calls with a %v deadline, slowest returned after %v", time.Since(frozenAt), calls_, deadline, worst)
	for _, k := range unknown {
		c.note(EvUnknown, "", k)
	}
	c.forgetAcked(unknown...)

	r := c.settle(3*workerTTL + 15*time.Second)
	t.Logf("after the outage\n%s", r.Summary())
	// A failed DispatchJob means the job does not run: every one of them
	// was withdrawn, however long Redis stayed frozen (the admission each
	// sent ran at the thaw, after the call gave up).
	require.Eventually(t, func() bool {
		for k := range c.report().Running {
			if strings.HasPrefix(k, "outage-") {
				return false
			}
		}
		return true
	}, 20*time.Second, 100*time.Millisecond, "a DispatchJob that failed during the outage left its job running")
	c.dispatchN("after", 20)
	c.settle(10 * time.Second)
	c.finish(false)
}
