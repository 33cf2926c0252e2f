package chaos

import (
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/shepherd-go/shepherd/pool"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// Paused process (a GC pause, SIGSTOP, a half-open TCP connection): one of
// two worker processes is SIGSTOPped for longer than every grace period the
// pool has (WorkerTTL, PendingJobTTL at its default, the routers' ack
// grace) while jobs keep being dispatched. What a user feels is measured:
// how long after the pause each job the process ran starts again
// elsewhere, and how long the DispatchJob calls made during the pause
// take. Both must stay within WorkerTTL + 1s (docs/ARCHITECTURE.md,
// invariants: 7).
//
// The victim's routing loop blocks on the job stream for longer than the
// pause (the block duration is one more timeout to outlast), so that its
// read is still registered at Redis when the pool requeues its jobs: Redis
// hands new entries to the client that has been blocked longest, here the
// frozen one. The other process uses the default block duration.
func TestChaosPausedProcess(t *testing.T) {
	t.Parallel()
	tm := timing{ttl: *chaosPauseTTL, pending: pool.DefaultPendingJobTTL}
	pause := max(faultPhase(0), tm.pending+tm.ttl+2*time.Second)
	bound := tm.ttl + time.Second
	c := newClusterTimed(t, 0, tm, nil)
	c.spawnWith("-block", "0")
	victim := c.spawnWith("-block", (pause + time.Minute).String())
	c.dispatchN("held", 200)
	r := c.settle(10 * time.Second)
	held := 0
	for _, hs := range r.Running {
		for _, h := range hs {
			if strings.HasPrefix(h, victim+"/") {
				held++
			}
		}
	}
	require.Positive(t, held, "the victim runs no job")

	c.freeze(victim)
	frozenAt := time.Now()
	// 100 dispatches during the pause, one every 20ms, each on its own
	// goroutine: the first ones reach the victim's workers before it is
	// declared dead.
	const during = 100
	took := make([]time.Duration, during)
	errs := make([]error, during)
	ctx := ctxFor(t, pause+time.Minute)
	var wg sync.WaitGroup
	pace := time.NewTicker(20 * time.Millisecond)
	for i := range during {
		wg.Add(1)
		go func() {
			defer wg.Done()
			t0 := time.Now()
			errs[i] = c.dispatch(ctx, fmt.Sprintf("during-%03d", i))
			took[i] = time.Since(t0)
		}()
		<-pace.C
	}
	pace.Stop()
	wg.Wait()
	if rest := time.Until(frozenAt.Add(pause)); rest > 0 {
		<-time.After(rest) // the fault lasts pause, at least
	}
	paused := c.report()
	c.thaw(victim)
	for i, err := range errs {
		require.NoError(t, err, "DispatchJob of during-%03d while %s was frozen", i, victim)
	}
	r = c.settle(3*tm.ttl + 10*time.Second)
	t.Logf("%s (holding %d jobs) frozen %v at WorkerTTL %v, PendingJobTTL %v; DispatchJob during the pause: p50 %v p99 %v max %v\n%s",
		victim, held, pause, tm.ttl, tm.pending,
		Percentile(took, 50), Percentile(took, 99), Percentile(took, 100), paused.Summary())
	t.Logf("after the thaw\n%s", r.Summary())

	assert.Empty(t, paused.UnmovedAtThaw, "jobs of the frozen process did not start elsewhere during the pause")
	assert.Len(t, paused.PauseRecoveries, held, "every job of the frozen process starts elsewhere")
	assert.LessOrEqual(t, Percentile(paused.PauseRecoveries, 100), bound,
		"a job of the frozen process started elsewhere later than WorkerTTL + 1s after the pause")
	assert.LessOrEqual(t, Percentile(took, 99), bound,
		"p99 of DispatchJob during the pause exceeds WorkerTTL + 1s")
	assert.Len(t, r.StaleAfterThaw, held, "every stale copy is stopped after SIGCONT")
	c.finish(true)
}
