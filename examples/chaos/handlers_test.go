package chaos

import (
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/shepherd-go/shepherd/pool"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// Slow and failing handlers: a first Start that sleeps past PendingJobTTL,
// Starts that fail for some keys, Stops that panic.
func TestChaosSlowAndFailingHandlers(t *testing.T) {
	t.Parallel()
	slow := pendingTTL + pendingTTL/2
	c := newCluster(t, 3, nil,
		"-slow-prefix", "slow-", "-slow", slow.String(),
		"-fail-prefix", "fail-", "-panic-prefix", "panic-")
	ctx := ctxFor(t, 60*time.Second)

	var wg sync.WaitGroup
	slowErrs := make(chan error, 3)
	for i := 0; i < 3; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			start := time.Now()
			err := c.dispatch(ctx, fmt.Sprintf("slow-%d", i))
			t.Logf("slow-%d: DispatchJob returned %v after %v", i, err, time.Since(start))
			slowErrs <- err
		}()
	}
	for i := 0; i < 5; i++ {
		k := fmt.Sprintf("fail-%d", i)
		err := c.dispatch(ctx, k)
		var se *pool.StartError
		require.ErrorAs(t, err, &se, "%s", k)
		assert.Equal(t, k, se.Key)
	}
	c.dispatchN("panic", 10)
	c.dispatchN("ok", 30)
	wg.Wait()
	close(slowErrs)
	for err := range slowErrs {
		require.NoError(t, err, "a Start slower than PendingJobTTL must still start the job once")
	}
	r := c.settle(3*pendingTTL + 10*time.Second)
	t.Logf("handlers\n%s", r.Summary())
	keys, err := c.disp.JobKeys(ctx)
	require.NoError(t, err)
	for _, k := range keys {
		assert.NotContains(t, k, "fail-", "a failed start left its record")
	}
	for i := 0; i < 3; i++ {
		assert.Len(t, r.Running[fmt.Sprintf("slow-%d", i)], 1)
	}

	// A panicking Stop is reported, and the job is gone all the same.
	for i := 0; i < 3; i++ {
		k := fmt.Sprintf("panic-%04d", i)
		err := c.stop(ctx, k)
		require.Error(t, err)
		require.True(t, isStopPanic(err), "%v", err)
		require.False(t, errors.Is(err, pool.ErrJobNotFound))
	}
	r = c.settle(10 * time.Second)
	for i := 0; i < 3; i++ {
		assert.Empty(t, r.Running[fmt.Sprintf("panic-%04d", i)])
	}
	// The other panic-* keys panic at Shutdown: it must finish anyway.
	c.finish(false)
}

// Rolling restart: every worker process is replaced, one by one, by a new
// one, the old one leaving with Close. Jobs move at most a few times.
func TestChaosRollingRestart(t *testing.T) {
	t.Parallel()
	c := newCluster(t, 3, nil)
	c.dispatchN("roll", 150)
	c.settle(10 * time.Second)
	rounds := 1
	if *chaosDuration > 0 {
		rounds = max(1, int(*chaosDuration/(10*time.Second)))
	}
	for round := 0; round < rounds; round++ {
		for _, old := range c.live() {
			c.spawn()
			c.term(old)
		}
	}
	r := c.settle(3*workerTTL + 10*time.Second)
	moved := 0
	for _, n := range r.StartsPerKey {
		if n > 1 {
			moved++
		}
	}
	t.Logf("rolling restart of every process (%d rounds): %d of %d jobs moved, %d moved more than once\n%s",
		rounds, moved, len(r.StartsPerKey), r.MovedMoreThanOnce(), r.Summary())
	assert.Empty(t, r.Overlaps, "a job ran twice at once during a rolling restart")
	assert.Empty(t, r.ExitedHolding, "Close left jobs running")
	c.finish(false)
}
