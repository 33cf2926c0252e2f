package pool

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/shepherd-go/shepherd/internal/redistest"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// producer is a JobProducer whose plan the test sets; it counts its
// Plan calls, and the calls under way at once.
type producer struct {
	name    string
	mu      sync.Mutex
	plan    *JobPlan
	err     error
	block   chan struct{} // when set, Plan waits for it to close
	calls   atomic.Int64
	inPlan  atomic.Int64
	maxConc atomic.Int64
	by      sync.Map // node id → calls
	node    string
}

func (p *producer) Name() string { return p.name }

func (p *producer) Plan(ctx context.Context) (*JobPlan, error) {
	now := p.inPlan.Add(1)
	defer p.inPlan.Add(-1)
	for {
		m := p.maxConc.Load()
		if now <= m || p.maxConc.CompareAndSwap(m, now) {
			break
		}
	}
	p.calls.Add(1)
	if p.node != "" {
		v, _ := p.by.LoadOrStore(p.node, new(atomic.Int64))
		v.(*atomic.Int64).Add(1)
	}
	p.mu.Lock()
	block, plan, err := p.block, p.plan, p.err
	p.mu.Unlock()
	if block != nil {
		select {
		case <-block:
		case <-ctx.Done():
			return nil, ctx.Err()
		}
		p.mu.Lock()
		plan, err = p.plan, p.err
		p.mu.Unlock()
	}
	return plan, err
}

func (p *producer) set(plan *JobPlan, err error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.plan, p.err = plan, err
}

func jobsOf(payload string, keys ...string) []PlannedJob {
	out := make([]PlannedJob, len(keys))
	for i, k := range keys {
		out[i] = PlannedJob{Key: k, Payload: []byte(payload)}
	}
	return out
}

// scheduleInfo returns the pool's schedule name as Inspect shows it.
func scheduleInfo(t *testing.T, n *Node, name string) (ScheduleInfo, bool) {
	t.Helper()
	st, err := n.Stats(testCtx(t, 5*time.Second))
	require.NoError(t, err)
	for _, s := range st.Schedules {
		if s.Name == name {
			return s, true
		}
	}
	return ScheduleInfo{}, false
}

// waitPlans waits until the schedule's planner has begun at least
// `after` plans beyond those counted now, and the last one is recorded.
func waitPlans(t *testing.T, n *Node, p *producer, more int64) ScheduleInfo {
	t.Helper()
	target := p.calls.Load() + more
	var info ScheduleInfo
	require.Eventually(t, func() bool {
		if p.calls.Load() < target+1 { // the plan after the target one began: target's outcome is recorded
			return false
		}
		info, _ = scheduleInfo(t, n, p.name)
		return true
	}, 20*time.Second, 5*time.Millisecond)
	return info
}

func TestScheduleAppliesThePlanAsADiff(t *testing.T) {
	t.Parallel()
	pool := redistest.Name(t)
	n := addNode(t, srv.Client(), pool)
	rec := newRecorder()
	addWorkers(t, n, rec, 2)
	ctx := testCtx(t, 60*time.Second)
	require.NoError(t, n.DispatchJob(ctx, "by-hand", []byte("x")))

	p := &producer{name: "devices"}
	p.set(&JobPlan{Jobs: jobsOf("v1", "a", "b", "c", "d")}, nil)
	require.NoError(t, n.Schedule(ctx, p, 50*time.Millisecond))
	info := waitPlans(t, n, p, 1)
	assert.Equal(t, map[string]int{"a": 1, "b": 1, "c": 1, "d": 1, "by-hand": 1}, rec.runningKeys())
	assert.Equal(t, n.ID(), info.Planner)
	assert.Equal(t, 4, info.Keys)
	assert.Equal(t, 4, info.Planned)

	// A changed payload restarts its job; a stopped key stops; a new one
	// starts; the rest are left alone.
	p.set(&JobPlan{Jobs: append(jobsOf("v1", "a", "c", "d"), PlannedJob{Key: "b", Payload: []byte("v2")}, PlannedJob{Key: "e", Payload: []byte("v1")}),
		Stop: []string{"c", "by-hand-unknown"}}, nil)
	info = waitPlans(t, n, p, 2)
	assert.Equal(t, map[string]int{"a": 1, "b": 1, "c": 1, "d": 1, "e": 1, "by-hand": 1}, rec.runningKeys(),
		"c is in Jobs and Stop: it runs")
	rec.mu.Lock()
	assert.Equal(t, map[string]int{"a": 1, "b": 2, "c": 1, "d": 1, "e": 1, "by-hand": 1}, rec.starts, "only b restarted, once")
	rec.mu.Unlock()
	assert.Zero(t, info.Failed, info.Errors)

	// StopOthers stops what the schedule started and the plan leaves out,
	// never a job dispatched by hand.
	p.set(&JobPlan{Jobs: jobsOf("v1", "a", "d"), Stop: []string{"e", "e", strings.Repeat("k", MaxKeySize+1)}, StopOthers: true}, nil)
	info = waitPlans(t, n, p, 2)
	assert.Equal(t, map[string]int{"a": 1, "d": 1, "by-hand": 1}, rec.runningKeys())
	rec.mu.Lock()
	assert.Equal(t, 1, rec.stops["e"], "a key listed in Stop twice and left out by StopOthers stops once")
	rec.mu.Unlock()
	assert.Equal(t, 1, info.Failed, "the invalid key of Stop is reported")
	assert.Equal(t, 2, info.Keys)
	rec.mu.Lock()
	assert.Equal(t, 1, rec.starts["a"])
	assert.Equal(t, 1, rec.starts["d"])
	rec.mu.Unlock()
}

func TestScheduleAdoptsAndNotifies(t *testing.T) {
	t.Parallel()
	pool := redistest.Name(t)
	n := addNode(t, srv.Client(), pool)
	rec := newRecorder()
	addWorkers(t, n, rec, 1)
	ctx := testCtx(t, 60*time.Second)
	require.NoError(t, n.DispatchJob(ctx, "same", []byte("p")))
	require.NoError(t, n.DispatchJob(ctx, "other", []byte("old")))

	p := &producer{name: "notify"}
	p.set(&JobPlan{Jobs: []PlannedJob{{Key: "same", Payload: []byte("p")}, {Key: "other", Payload: []byte("new")}}}, nil)
	require.NoError(t, n.Schedule(ctx, p, 50*time.Millisecond, WithPayloadChange(NotifyOnChange)))
	info := waitPlans(t, n, p, 2)
	rec.mu.Lock()
	assert.Equal(t, map[string]int{"same": 1, "other": 1}, rec.starts, "running jobs are adopted, not started again")
	assert.Equal(t, [][]byte{[]byte("new")}, rec.notified["other"], "notified once with the new payload")
	assert.Empty(t, rec.notified["same"])
	rec.mu.Unlock()
	assert.Equal(t, 2, info.Keys)
	assert.Zero(t, info.Changed, "the last plan had nothing to change")
}

func TestScheduleReportsAndRetriesFailedKeys(t *testing.T) {
	t.Parallel()
	pool := redistest.Name(t)
	n := addNode(t, srv.Client(), pool)
	rec := newRecorder()
	rec.failKeys["bad"] = true
	addWorkers(t, n, rec, 1)
	ctx := testCtx(t, 60*time.Second)

	p := &producer{name: "flaky"}
	p.set(&JobPlan{Jobs: append(jobsOf("x", "good", "bad"), PlannedJob{Key: ""})}, nil)
	require.NoError(t, n.Schedule(ctx, p, 50*time.Millisecond))
	info := waitPlans(t, n, p, 1)
	assert.Equal(t, 2, info.Failed)
	assert.Len(t, info.Errors, 2)
	assert.Contains(t, fmt.Sprint(info.Errors), "bad: ")
	assert.Contains(t, fmt.Sprint(info.Errors), "invalid job key")
	assert.Equal(t, map[string]int{"good": 1}, rec.runningKeys())

	// The next plans try bad again; once it can start, it runs.
	rec.mu.Lock()
	rec.failKeys["bad"] = false
	rec.mu.Unlock()
	p.set(&JobPlan{Jobs: jobsOf("x", "good", "bad")}, nil)
	waitPlans(t, n, p, 2)
	assert.Equal(t, map[string]int{"good": 1, "bad": 1}, rec.runningKeys())
	info, _ = scheduleInfo(t, n, "flaky")
	assert.Zero(t, info.Failed)

	// Plan's own error is recorded; the plan is asked for again.
	p.set(nil, errors.New("inventory unreachable"))
	info = waitPlans(t, n, p, 2)
	assert.Equal(t, "inventory unreachable", info.LastError)
	assert.Equal(t, map[string]int{"good": 1, "bad": 1}, rec.runningKeys(), "a failed Plan stops nothing")
}

func TestScheduleHasOnePlannerAndMovesWhenItDies(t *testing.T) {
	t.Parallel()
	pool := redistest.Name(t)
	rec := newRecorder()
	var nodes []*Node
	p := &producer{name: "one"}
	p.set(&JobPlan{Jobs: jobsOf("x", "k1", "k2")}, nil)
	ctx := testCtx(t, 60*time.Second)
	host := addNode(t, srv.Client(), pool)
	addWorkers(t, host, rec, 2)
	for range 3 {
		n := addNode(t, srv.NewClient(), pool, WithClientOnly())
		require.NoError(t, n.Schedule(ctx, p, 20*time.Millisecond))
		nodes = append(nodes, n)
	}
	info := waitPlans(t, host, p, 10)
	assert.EqualValues(t, 1, p.maxConc.Load(), "two nodes planned at once")
	var planner *Node
	for _, n := range nodes {
		if n.ID() == info.Planner {
			planner = n
		}
	}
	require.NotNil(t, planner, "the planner %q is none of the scheduling nodes", info.Planner)
	crashed := time.Now()
	planner.crash()
	require.Eventually(t, func() bool {
		i, _ := scheduleInfo(t, host, "one")
		return i.Planner != "" && i.Planner != planner.ID()
	}, 10*time.Second, 5*time.Millisecond)
	t.Logf("planning moved %v after the planner died (WorkerTTL 1s)", time.Since(crashed))
	waitPlans(t, host, p, 3)
	assert.EqualValues(t, 1, p.maxConc.Load())
	assert.Equal(t, map[string]int{"k1": 1, "k2": 1}, rec.runningKeys())
}
