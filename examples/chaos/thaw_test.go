package chaos

import (
	"flag"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

var chaosThaws = flag.Int("chaos.thaws", 2,
	"rounds of TestChaosThawedProcessTakesJobsBack (the soak that proves the fix ran 50)")

// A process frozen for longer than WorkerTTL loses its jobs to the other
// process; thawed, it rejoins and jobs move back to it while its workers
// still stop their stale copies. Its handler is one object for all its
// workers, keyed by job key, as most users write it: a stale copy's Stop
// that runs after a fresh Start of the same key on another worker of the
// process stops the fresh run, while the pool records the job as running
// on a healthy worker, and nothing restarts it.
// Every Stop takes 30 ms, so a process's workers take a while to stop
// their stale copies and the first one to rejoin gets keys back while the
// others still hold them; the CPU is loaded around the thaw.
//
// Each round dispatches 200 jobs, freezes one of two processes until all
// its jobs have started on the other and 1 s more, thaws it, and requires
// every job to end up running exactly once, where the pool's records say
// (settle compares each key's last handler event with InspectJob).
func TestChaosThawedProcessTakesJobsBack(t *testing.T) {
	t.Parallel()
	for round := range *chaosThaws {
		if !thawRound(t, round) {
			return
		}
	}
}

// thawRound runs one round in its own cluster and reports whether it
// passed.
func thawRound(t *testing.T, round int) bool {
	return t.Run("round", func(t *testing.T) {
		tm := timing{ttl: 2 * time.Second, pending: pendingTTL}
		c := newClusterTimed(t, 0, tm, nil, "-shared", "-stop-delay", "30ms")
		victim := c.spawn()
		c.spawn()
		c.dispatchN("thaw", 200)
		r := c.settle(15 * time.Second)
		held := 0
		for _, hs := range r.Running {
			for _, h := range hs {
				if strings.HasPrefix(h, victim+"/") {
					held++
				}
			}
		}
		require.Positive(t, held, "round %d: the victim runs no job", round)

		c.freeze(victim)
		// Until every job of the victim started on the other process.
		deadline := time.Now().Add(3*tm.ttl + 10*time.Second)
		for len(c.report().PauseRecoveries) < held {
			require.True(t, time.Now().Before(deadline), "round %d: the victim's %d jobs did not all move", round, held)
			time.Sleep(50 * time.Millisecond) // polling interval, not synchronization
		}
		time.Sleep(time.Second) // the fault: frozen 1 s longer
		stopLoad := loadCPU(3 * time.Second)
		c.thaw(victim)
		r = c.settle(3*tm.ttl + 15*time.Second)
		stopLoad()
		t.Logf("round %d: %d jobs moved off the frozen process and back\n%s", round, held, r.Summary())
		c.finish(true)
	})
}

// loadCPU keeps every core busy for up to d (or until the returned func
// is called), so that the process under test is scheduled late, as on a
// loaded machine.
func loadCPU(d time.Duration) (stop func()) {
	done := make(chan struct{})
	var wg sync.WaitGroup
	for range runtime.NumCPU() {
		wg.Add(1)
		go func() {
			defer wg.Done()
			end := time.Now().Add(d)
			for time.Now().Before(end) {
				select {
				case <-done:
					return
				default:
				}
				for i := 0; i < 1e5; i++ { // a busy loop between checks
				}
			}
		}()
	}
	var once sync.Once
	return func() {
		once.Do(func() { close(done) })
		wg.Wait()
	}
}
