package queue

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/shepherd-go/shepherd/internal/redistest"
)

// starts records the payloads of the tasks a handler started, in order.
type starts struct {
	mu  sync.Mutex
	ids []string
}

func (s *starts) add(p string) {
	s.mu.Lock()
	s.ids = append(s.ids, p)
	s.mu.Unlock()
}

func (s *starts) list() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]string(nil), s.ids...)
}

// A worker takes the highest priority first, and tasks of one priority in
// the order they came; delayed and retried tasks keep their priority.
func TestPriorityOrdersTheTasks(t *testing.T) {
	t.Parallel()
	q := open(t, redistest.Name(t))
	ctx := testCtx(t, 30*time.Second)
	prios := []int{0, 5, 9, 5, 0, 9, 1, 0}
	var fs []*Future
	for i, p := range prios {
		f, err := q.Submit(ctx, []byte(fmt.Sprintf("%d-%d", p, i)), WithPriority(p))
		require.NoError(t, err)
		fs = append(fs, f)
	}
	info, err := q.Inspect(ctx, fs[2].ID())
	require.NoError(t, err)
	assert.Equal(t, 9, info.Priority)
	st, err := q.Stats(ctx)
	require.NoError(t, err)
	assert.EqualValues(t, len(prios), st.Available, "waiting tasks of every priority are available")
	waiting, err := q.Tasks(ctx, StateWaiting, 0, 100)
	require.NoError(t, err)
	var listed []string
	for _, w := range waiting {
		listed = append(listed, string(w.Payload))
	}
	want := []string{"9-2", "9-5", "5-1", "5-3", "1-6", "0-0", "0-4", "0-7"}
	assert.Equal(t, want, listed, "Tasks lists waiting tasks in the order they are taken")

	var s starts
	serve(t, q, func(_ context.Context, t *Task) ([]byte, error) {
		s.add(string(t.Payload))
		return nil, nil
	}, WithWorkers(1))
	for _, f := range fs {
		_, err := wait(t, f, 10*time.Second)
		require.NoError(t, err)
	}
	assert.Equal(t, want, s.list())
	n, err := q.rdb.Exists(ctx, q.lay.tenants).Result()
	require.NoError(t, err)
	assert.Zero(t, n, "the count of tasks above priority 0 is gone with the last one")
}

// A retried task comes back at its priority: ahead of waiting tasks of a
// lower one.
func TestRetriedTaskKeepsItsPriority(t *testing.T) {
	t.Parallel()
	q := open(t, redistest.Name(t))
	ctx := testCtx(t, 30*time.Second)
	var s starts
	release, free := gate(t)
	serve(t, q, func(_ context.Context, t *Task) ([]byte, error) {
		s.add(fmt.Sprintf("%s#%d", t.Payload, t.Attempt))
		if string(t.Payload) == "high" && t.Attempt == 1 {
			<-release // the low ones queue up meanwhile
			return nil, fmt.Errorf("once more")
		}
		return nil, nil
	}, WithWorkers(1), fastRetries)
	high, err := q.Submit(ctx, []byte("high"), WithPriority(3), WithMaxAttempts(2))
	require.NoError(t, err)
	require.Eventually(t, func() bool { return len(s.list()) == 1 }, 5*time.Second, time.Millisecond)
	var lows []*Future
	for i := range 3 {
		f, err := q.Submit(ctx, []byte(fmt.Sprint("low", i)))
		require.NoError(t, err)
		lows = append(lows, f)
	}
	// The retry is due within the backoff; the worker is held until then
	// by the first attempt itself returning only now.
	free()
	_, err = wait(t, high, 10*time.Second)
	require.NoError(t, err)
	for _, f := range lows {
		_, err := wait(t, f, 10*time.Second)
		require.NoError(t, err)
	}
	got := s.list()
	require.Len(t, got, 5)
	assert.Equal(t, "high#1", got[0])
	// The retry waits its backoff (5-20ms): low tasks may start first
	// meanwhile, but once due it is taken before the low ones left.
	info, err := q.Inspect(ctx, high.ID())
	require.NoError(t, err)
	assert.Equal(t, 3, info.Priority)
	assert.Equal(t, 2, info.Attempt)
}

// Priority orders a tenant's own tasks: a tenant with a backlog of urgent
// tasks still takes turns with one whose tasks have the lowest priority.
func TestPriorityDoesNotStarveAnotherTenant(t *testing.T) {
	t.Parallel()
	q := open(t, redistest.Name(t))
	ctx := testCtx(t, 60*time.Second)
	require.NoError(t, q.SetTenant(ctx, "a", 4))
	require.NoError(t, q.SetTenant(ctx, "b", 4))
	for range 300 {
		_, err := q.Submit(ctx, []byte("a"), WithTenant("a"), WithPriority(MaxPriority))
		require.NoError(t, err)
	}
	var bs []*Future
	for range 10 {
		f, err := q.Submit(ctx, []byte("b"), WithTenant("b"))
		require.NoError(t, err)
		bs = append(bs, f)
	}
	assert.EqualValues(t, 300, tenantOf(t, q, "a").Waiting)
	serve(t, q, func(ctx context.Context, t *Task) ([]byte, error) {
		time.Sleep(time.Millisecond)
		return nil, nil
	}, WithWorkers(4))
	for _, f := range bs {
		_, err := wait(t, f, 20*time.Second)
		require.NoError(t, err)
	}
	left := tenantOf(t, q, "a").Waiting
	t.Logf("a had %d urgent tasks waiting when b's 10 were done", left)
	assert.Greater(t, left, int64(200), "b's tasks waited for a's urgent backlog")
}

// Cancelling a waiting task of a priority above 0 takes it off its list
// and its count; a bad priority is refused with nothing written.
func TestPriorityCancelAndBadInput(t *testing.T) {
	t.Parallel()
	name := redistest.Name(t)
	q := open(t, name)
	ctx := testCtx(t, 20*time.Second)
	before := redistest.Keys(t, q.rdb, "shepherd:{"+name+"}:*")
	for _, p := range []int{-1, MaxPriority + 1} {
		_, err := q.Submit(ctx, nil, WithPriority(p))
		assert.ErrorIs(t, err, ErrInvalidOption, "priority %d", p)
	}
	assert.Equal(t, before, redistest.Keys(t, q.rdb, "shepherd:{"+name+"}:*"))

	f, err := q.Submit(ctx, nil, WithPriority(4))
	require.NoError(t, err)
	require.NoError(t, q.Cancel(ctx, f.ID()))
	_, err = wait(t, f, 5*time.Second)
	assert.ErrorIs(t, err, ErrCancelled)
	st, err := q.Stats(ctx)
	require.NoError(t, err)
	assert.Zero(t, st.Available)
	for _, k := range []string{q.lay.tenants, q.lay.tenantReady("", 4), q.lay.turns} {
		n, err := q.rdb.Exists(ctx, k).Result()
		require.NoError(t, err)
		assert.Zero(t, n, "%s is left after the cancel", k)
	}
}

// The tasks of a killed process come back at their priority: ahead of
// the tasks of a lower one that came meanwhile.
func TestKilledProcessTasksComeBackAtTheirPriority(t *testing.T) {
	t.Parallel()
	const ttl = time.Second
	name := redistest.Name(t)
	q := open(t, name, WithTTL(ttl))
	c := startChild(t, name, ttl, 4, 1500*time.Millisecond)
	ctx := testCtx(t, 30*time.Second)
	var urgent []*Future
	for range 4 {
		f, err := q.Submit(ctx, []byte("urgent"), WithPriority(7), WithMaxAttempts(3))
		require.NoError(t, err)
		urgent = append(urgent, f)
	}
	require.Eventually(t, func() bool {
		st, err := q.Stats(ctx)
		return err == nil && st.InFlight == 4
	}, 10*time.Second, 5*time.Millisecond, "the child never took its tasks")
	require.NoError(t, c.cmd.Process.Kill())
	var later []*Future
	for range 4 {
		f, err := q.Submit(ctx, []byte("later"), WithPriority(3))
		require.NoError(t, err)
		later = append(later, f)
	}
	require.Eventually(t, func() bool {
		st, err := q.Stats(ctx)
		return err == nil && st.InFlight == 0 && st.Available == 8
	}, 10*time.Second, 5*time.Millisecond, "the killed child's tasks were not given back")
	var s starts
	serve(t, q, func(_ context.Context, t *Task) ([]byte, error) {
		s.add(string(t.Payload))
		return nil, nil
	}, WithWorkers(1))
	for _, f := range append(urgent, later...) {
		_, err := wait(t, f, 10*time.Second)
		require.NoError(t, err)
	}
	assert.Equal(t, []string{"urgent", "urgent", "urgent", "urgent", "later", "later", "later", "later"}, s.list())
}

// docs/queue.md's recipe for strict priority order: one worker, nothing
// taken ahead. Tasks submitted while the worker is busy start by
// priority, not by when they came: a task of priority 9 submitted last
// starts before the tasks of priority 0 that waited longer.
func TestOneWorkerWithoutPrefetchStartsByPriority(t *testing.T) {
	t.Parallel()
	q := open(t, redistest.Name(t))
	ctx := testCtx(t, 30*time.Second)
	busy := make(chan struct{})
	release, free := gate(t)
	var s starts
	serve(t, q, func(_ context.Context, t *Task) ([]byte, error) {
		s.add(string(t.Payload))
		if string(t.Payload) == "first" {
			close(busy)
			<-release
		}
		return nil, nil
	}, WithWorkers(1), WithPrefetch(0))

	submit := func(payload string, prio int) *Future {
		f, err := q.Submit(ctx, []byte(payload), WithPriority(prio))
		require.NoError(t, err)
		return f
	}
	fs := []*Future{submit("first", 0)}
	select {
	case <-busy:
	case <-ctx.Done():
		t.Fatal("the first task did not start")
	}
	fs = append(fs, submit("low-1", 0), submit("low-2", 0), submit("mid", 5), submit("high", 9))
	free()
	for _, f := range fs {
		_, err := wait(t, f, 10*time.Second)
		require.NoError(t, err)
	}
	assert.Equal(t, []string{"first", "high", "mid", "low-1", "low-2"}, s.list())
}
