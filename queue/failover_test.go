package queue

import (
	"context"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/shepherd-go/shepherd/internal/redistest"
	"github.com/shepherd-go/shepherd/internal/testlog"
)

// failoverLoad is what a failover test saw of a queue under load: which
// Submits returned nil, which futures returned a result, and when each
// task's attempts began.
type failoverLoad struct {
	mu       sync.Mutex
	acked    map[string]bool
	results  map[string]time.Time // when its Wait returned a result
	lost     map[string]error     // acked, but Wait returned an error
	runs     map[string][]time.Time
	failedOK map[string]bool // its Submit failed
	stop     atomic.Bool
}

func newFailoverLoad() *failoverLoad {
	return &failoverLoad{acked: map[string]bool{}, results: map[string]time.Time{}, lost: map[string]error{},
		runs: map[string][]time.Time{}, failedOK: map[string]bool{}}
}

func (l *failoverLoad) handler(ctx context.Context, t *Task) ([]byte, error) {
	l.mu.Lock()
	l.runs[t.ID] = append(l.runs[t.ID], time.Now())
	l.mu.Unlock()
	time.Sleep(2 * time.Millisecond)
	return []byte("ok"), nil
}

// submit submits from 4 goroutines until stopped, each waiting for its
// futures in the background; wg ends when every future ended.
func (l *failoverLoad) submit(ctx context.Context, q *Queue, wg *sync.WaitGroup) {
	prefix := randomID(4)
	for g := range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; !l.stop.Load(); i++ {
				id := fmt.Sprintf("%s-%d-%d", prefix, g, i)
				f, err := q.Submit(ctx, []byte("p"), WithTaskID(id))
				if err != nil {
					l.mu.Lock()
					l.failedOK[id] = true
					l.mu.Unlock()
					time.Sleep(5 * time.Millisecond)
					continue
				}
				l.mu.Lock()
				l.acked[id] = true
				l.mu.Unlock()
				wg.Add(1)
				go func() {
					defer wg.Done()
					wctx, cancel := context.WithTimeout(ctx, 60*time.Second)
					defer cancel()
					_, err := f.Wait(wctx)
					l.mu.Lock()
					defer l.mu.Unlock()
					if err != nil {
						l.lost[id] = err
						return
					}
					l.results[id] = time.Now()
				}()
				time.Sleep(time.Millisecond)
			}
		}()
	}
}

// count returns how many tasks were acked, lost (acked, no result), run
// again after their caller had the result (undone), and whose Submit
// failed and which ran anyway.
func (l *failoverLoad) count() (acked, lost, undone, failedRan int) {
	l.mu.Lock()
	defer l.mu.Unlock()
	for id, at := range l.results {
		for _, r := range l.runs[id] {
			if r.After(at) {
				undone++
				break
			}
		}
	}
	for id := range l.failedOK {
		if len(l.runs[id]) > 0 {
			failedRan++
		}
	}
	return len(l.acked), len(l.lost), undone, failedRan
}

// runQueueFailover runs two processes of a queue on a Sentinel group (a
// primary, a replica, three sentinels) with WithReplicas(replicas) under
// a steady load, fails the primary over as kind says ("kill": SIGKILL;
// "planned": SENTINEL FAILOVER; "behind": the replica frozen while writes
// go on, then the primary killed), and checks what became of the tasks.
func runQueueFailover(t *testing.T, kind string, replicas int) {
	ctx := testCtx(t, 120*time.Second)
	g := redistest.StartSentinels(t)
	name := redistest.Name(t)
	load := newFailoverLoad()
	var logs [2]*testlog.Buffer
	var qs [2]*Queue
	for i := range qs {
		logs[i] = &testlog.Buffer{}
		opts := []Option{WithTTL(2 * time.Second), WithLogger(slog.New(slog.NewTextHandler(logs[i], nil)))}
		if replicas > 0 {
			opts = append(opts, WithReplicas(replicas, 500*time.Millisecond))
		}
		q, err := Open(ctx, g.NewFailoverClient(), name, opts...)
		require.NoError(t, err)
		t.Cleanup(func() { _ = closeWithin(q) })
		serve(t, q, load.handler, WithWorkers(4))
		qs[i] = q
	}
	var wg sync.WaitGroup
	load.submit(ctx, qs[0], &wg)
	require.Eventually(t, func() bool { a, _, _, _ := load.count(); return a >= 300 }, 30*time.Second, 10*time.Millisecond)

	old, now, err := g.Fault(ctx, kind)
	require.NoError(t, err)
	switched := time.Now()
	if kind == redistest.FaultKill || kind == redistest.FaultBehind {
		// The only replica is the new master: the old one comes back as
		// its replica, so that WithReplicas(1) can be met again; not as
		// an empty master, which a second failover may promote
		// (Rejoin).
		require.NoError(t, g.Rejoin(ctx, old))
	}

	// Messages follow the master: each process subscribes on the new one.
	for _, q := range qs {
		ch := q.lay.doneChannel(q.proc)
		require.Eventually(t, func() bool {
			n, err := now.Client().PubSubNumSub(ctx, ch).Result()
			return err == nil && n[ch] >= 1
		}, 10*time.Second, 10*time.Millisecond, "process %s is not subscribed on the new master", q.proc)
	}
	t.Logf("%s: subscriptions on the new master %v after the switch", kind, time.Since(switched).Round(time.Millisecond))

	acked0, _, _, _ := load.count()
	require.Eventually(t, func() bool { a, _, _, _ := load.count(); return a >= acked0+300 }, 40*time.Second, 10*time.Millisecond,
		"Submits did not resume after the failover")
	load.stop.Store(true)
	wg.Wait()
	acked, lost, undone, failedRan := load.count()
	t.Logf("%s, replicas %d: %d acknowledged, %d lost, %d results undone, %d failed Submits ran", kind, replicas, acked, lost, undone, failedRan)

	reported := func(level string) bool {
		for _, l := range logs {
			if strings.Contains(l.String(), "level="+level) && strings.Contains(l.String(), "Redis failed over") {
				return true
			}
		}
		return false
	}
	require.Eventually(t, func() bool { return reported("ERROR") || reported("WARN") }, 5*time.Second, 10*time.Millisecond,
		"no process reported the failover")
	if replicas > 0 {
		for id, err := range load.lost {
			t.Errorf("acknowledged task %s lost: %v", id, err)
		}
		assert.Zero(t, undone, "results undone by the failover")
		if t.Failed() {
			for _, l := range logs {
				for _, line := range l.Lines("level=WARN", "level=ERROR") {
					t.Log(line)
				}
			}
		}
	}
	t.Logf("reported at ERROR: %v", reported("ERROR"))
	if lost > 0 || undone > 0 || kind == redistest.FaultBehind {
		assert.True(t, reported("ERROR"), "a failover that lost writes is reported at ERROR:\n%s\n%s", logs[0], logs[1])
	}
	for _, l := range logs {
		for _, line := range l.Lines("Redis failed over", "Redis restarted") {
			t.Log(line)
		}
	}
}

func TestQueueFailoverKill(t *testing.T) {
	t.Parallel()
	runQueueFailover(t, redistest.FaultKill, 1)
}

func TestQueueFailoverPlanned(t *testing.T) {
	t.Parallel()
	runQueueFailover(t, redistest.FaultPlanned, 1)
}

func TestQueueFailoverPlannedWithoutReplicas(t *testing.T) {
	t.Parallel()
	runQueueFailover(t, redistest.FaultPlanned, 0)
}

// FAILOVER sent to the master: nothing is lost, and the Sentinel clients
// find the new master about 30 s later (the processes' writes meanwhile
// go to the old primary, now a replica, which refuses them).
func TestQueueFailoverCommand(t *testing.T) {
	t.Parallel()
	runQueueFailover(t, redistest.FaultCommand, 1)
}

func TestQueueFailoverBehind(t *testing.T) {
	t.Parallel()
	runQueueFailover(t, redistest.FaultBehind, 1)
}
