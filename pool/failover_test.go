package pool

import (
	"context"
	"fmt"
	"log/slog"
	"maps"
	"slices"
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

// poolLoad dispatches keys and stops every fifth after its dispatch,
// and records which calls returned nil.
type poolLoad struct {
	mu      sync.Mutex
	want    map[string]bool // dispatched (nil) and not stopped (nil)
	unknown map[string]bool // a call of the key failed: it may run or not
	acked   int
	stop    atomic.Bool
}

func (l *poolLoad) run(ctx context.Context, n *Node, prefix string, wg *sync.WaitGroup) {
	for g := range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; !l.stop.Load(); i++ {
				key := fmt.Sprintf("%s-%d-%d", prefix, g, i)
				cctx, cancel := context.WithTimeout(ctx, 20*time.Second)
				err := n.DispatchJob(cctx, key, []byte("p"))
				if err == nil && i%5 == 4 {
					l.note(key, true, nil)
					err = n.StopJob(cctx, key)
					l.note(key, false, err)
				} else {
					l.note(key, true, err)
				}
				cancel()
				if err != nil {
					time.Sleep(5 * time.Millisecond)
				}
			}
		}()
	}
}

func (l *poolLoad) note(key string, dispatch bool, err error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	switch {
	case err != nil:
		l.unknown[key] = true
		delete(l.want, key)
	case dispatch:
		l.want[key] = true
		l.acked++
	default:
		delete(l.want, key)
	}
}

func (l *poolLoad) count() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.acked
}

// runPoolFailover runs a pool of two nodes (2 workers each) on a Sentinel
// group with WithReplicas(replicas) under a load of dispatches and stops,
// fails the primary over as kind says (as runQueueFailover), and checks
// that every job whose dispatch returned nil and was not stopped runs
// once, on the worker its record names, and nothing else runs.
func runPoolFailover(t *testing.T, kind string, replicas int) {
	ctx := testCtx(t, 150*time.Second)
	g := redistest.StartSentinels(t)
	pool := redistest.Name(t)
	load := &poolLoad{want: map[string]bool{}, unknown: map[string]bool{}}
	var logs [2]*testlog.Buffer
	var nodes [2]*Node
	var recs []*recorder
	for i := range nodes {
		logs[i] = &testlog.Buffer{}
		opts := []NodeOption{WithWorkerTTL(2 * time.Second), WithLogger(slog.New(slog.NewTextHandler(logs[i], nil)))}
		if replicas > 0 {
			opts = append(opts, WithReplicas(replicas, 500*time.Millisecond))
		}
		nodes[i] = addNode(t, g.NewFailoverClient(), pool, opts...)
		for range 2 {
			r := newRecorder()
			recs = append(recs, r)
			addWorkers(t, nodes[i], r, 1)
		}
	}
	var wg sync.WaitGroup
	load.run(ctx, nodes[0], "a", &wg)
	require.Eventually(t, func() bool { return load.count() >= 150 }, 30*time.Second, 10*time.Millisecond)

	old, _, err := g.Fault(ctx, kind)
	require.NoError(t, err)
	if kind == redistest.FaultKill || kind == redistest.FaultBehind {
		require.NoError(t, g.Rejoin(ctx, old)) // a replica of the new master (see Rejoin)
	}
	acked0 := load.count()
	require.Eventually(t, func() bool { return load.count() >= acked0+150 }, 60*time.Second, 10*time.Millisecond,
		"dispatches did not resume after the failover")
	load.stop.Store(true)
	wg.Wait()

	// At rest: every job that must run runs once, where its record says;
	// a key whose call failed may run or not, but not twice.
	load.mu.Lock()
	want, unknown := maps.Clone(load.want), maps.Clone(load.unknown)
	load.mu.Unlock()
	// With replicated acknowledgement, no acknowledged job is lost;
	// without, some may be (and that is reported). Either way, what runs
	// is what Redis records: each recorded job once, nothing else.
	var running map[string]int
	var recorded []string
	var problems []string
	ok := assert.Eventually(t, func() bool {
		running = union(recs...)
		keys, err := nodes[1].JobKeys(ctx)
		if err != nil {
			return false
		}
		recorded = keys
		problems = problems[:0]
		if replicas > 0 {
			for k := range want {
				if !slices.Contains(keys, k) {
					problems = append(problems, "acknowledged job "+k+" has no record")
				}
			}
		}
		for k, c := range running {
			switch {
			case c > 1:
				problems = append(problems, fmt.Sprintf("job %s runs %d times", k, c))
			case c == 1 && !slices.Contains(keys, k):
				problems = append(problems, "job "+k+" runs with no record")
			case c == 1 && replicas > 0 && !want[k] && !unknown[k]:
				// Without replicas, a stop that returned nil may be lost
				// (and is reported): the job runs again, as recorded.
				problems = append(problems, "job "+k+" runs, stopped or never dispatched")
			}
		}
		for _, k := range keys {
			if running[k] != 1 {
				raw, _ := nodes[1].rdb.HGet(ctx, nodes[1].lay.jobs, k).Result()
				problems = append(problems, fmt.Sprintf("recorded job %s runs %d times: %s", k, running[k], raw))
			}
		}
		return len(problems) == 0
	}, 30*time.Second, 50*time.Millisecond)
	if !ok {
		for _, p := range problems[:min(len(problems), 30)] {
			t.Error(p)
		}
		t.Errorf("%d problems", len(problems))
		for _, l := range logs {
			lines := l.Lines("level=WARN", "level=ERROR")
			for _, line := range lines[max(0, len(lines)-25):] {
				t.Log(line)
			}
		}
	}
	lost := 0
	for k := range want {
		if !slices.Contains(recorded, k) {
			lost++
		}
	}
	if lost > 0 {
		errs := 0
		for _, l := range logs {
			if strings.Contains(l.String(), "level=ERROR") && strings.Contains(l.String(), "Redis failed over") {
				errs++
			}
		}
		assert.Positive(t, errs, "%d acknowledged jobs lost, and no node reported it at ERROR", lost)
	}
	t.Logf("%s, replicas %d: %d acknowledged dispatches, %d to run, %d of them lost, %d calls failed",
		kind, replicas, load.count(), len(want), lost, len(unknown))
	for _, l := range logs {
		for _, line := range l.Lines("Redis failed over", "Redis restarted") {
			t.Log(line)
		}
	}
}

func TestPoolFailoverKill(t *testing.T) {
	t.Parallel()
	runPoolFailover(t, redistest.FaultKill, 1)
}

func TestPoolFailoverPlanned(t *testing.T) {
	t.Parallel()
	runPoolFailover(t, redistest.FaultPlanned, 1)
}

// FAILOVER sent to the master (see TestQueueFailoverCommand).
func TestPoolFailoverCommand(t *testing.T) {
	t.Parallel()
	runPoolFailover(t, redistest.FaultCommand, 1)
}

func TestPoolFailoverBehind(t *testing.T) {
	t.Parallel()
	runPoolFailover(t, redistest.FaultBehind, 1)
}

func TestPoolFailoverPlannedWithoutReplicas(t *testing.T) {
	t.Parallel()
	runPoolFailover(t, redistest.FaultPlanned, 0)
}

func TestPoolFailoverBehindWithoutReplicas(t *testing.T) {
	t.Parallel()
	runPoolFailover(t, redistest.FaultBehind, 0)
}
