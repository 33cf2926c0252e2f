package queue

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/shepherd-go/shepherd/internal/redistest"
)

// peak tracks how many calls run at once, per tenant (the payload).
type peak struct {
	mu      sync.Mutex
	now     map[string]int
	max     map[string]int
	started []string
}

func newPeak() *peak { return &peak{now: map[string]int{}, max: map[string]int{}} }

func (p *peak) enter(ten string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.now[ten]++
	p.max[ten] = max(p.max[ten], p.now[ten])
	p.started = append(p.started, ten)
}

func (p *peak) leave(ten string) {
	p.mu.Lock()
	p.now[ten]--
	p.mu.Unlock()
}

func (p *peak) peakOf(ten string) int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.max[ten]
}

func tenantOf(t *testing.T, q *Queue, id string) TenantInfo {
	t.Helper()
	all, err := q.Tenants(context.Background())
	require.NoError(t, err)
	for _, ti := range all {
		if ti.ID == id {
			return ti
		}
	}
	t.Fatalf("tenant %q not listed in %+v", id, all)
	return TenantInfo{}
}

func TestTenantCapacityHoldsAndUntenantedTasksRunBeside(t *testing.T) {
	t.Parallel()
	name := redistest.Name(t)
	q := open(t, name)
	ctx := testCtx(t, 30*time.Second)
	require.NoError(t, q.SetTenant(ctx, "a", 2))
	require.NoError(t, q.SetTenant(ctx, "b", 1))
	p := newPeak()
	h := func(ctx context.Context, t *Task) ([]byte, error) {
		p.enter(string(t.Payload))
		defer p.leave(string(t.Payload))
		time.Sleep(3 * time.Millisecond)
		return t.Payload, nil
	}
	var fs []*Future
	for i := range 60 {
		var opts []SubmitOption
		payload := "none"
		switch i % 3 {
		case 0:
			opts, payload = append(opts, WithTenant("a")), "a"
		case 1:
			opts, payload = append(opts, WithTenant("b")), "b"
		}
		f, err := q.Submit(ctx, []byte(payload), opts...)
		require.NoError(t, err)
		fs = append(fs, f)
	}
	// Two processes, 8 workers: capacity, not workers, is the bound.
	serve(t, q, h, WithWorkers(4), WithPrefetch(2))
	serve(t, open(t, name), h, WithWorkers(4))
	for _, f := range fs {
		_, err := wait(t, f, 20*time.Second)
		require.NoError(t, err)
	}
	assert.Equal(t, 2, p.peakOf("a"), "tenant a's capacity")
	assert.Equal(t, 1, p.peakOf("b"), "tenant b's capacity")
	assert.Greater(t, p.peakOf("none"), 2, "untenanted tasks are not capped")
	for _, id := range []string{"a", "b"} {
		ti := tenantOf(t, q, id)
		assert.Zero(t, ti.Load, "tenant %s's load after its tasks", id)
		assert.Zero(t, ti.Unfinished, "tenant %s's unfinished tasks", id)
		assert.Zero(t, ti.Waiting)
	}
}

// A tenant with a few tasks is not starved by one with a backlog: tenants
// take turns, so b's tasks start long before a's backlog drains, even
// when a's capacity would let it take every worker.
func TestTenantsTakeTurns(t *testing.T) {
	t.Parallel()
	q := open(t, redistest.Name(t))
	ctx := testCtx(t, 60*time.Second)
	require.NoError(t, q.SetTenant(ctx, "a", 8))
	require.NoError(t, q.SetTenant(ctx, "b", 8))
	for range 400 {
		_, err := q.Submit(ctx, []byte("a"), WithTenant("a"))
		require.NoError(t, err)
	}
	p := newPeak()
	serve(t, q, func(ctx context.Context, t *Task) ([]byte, error) {
		p.enter(string(t.Payload))
		defer p.leave(string(t.Payload))
		time.Sleep(2 * time.Millisecond)
		return nil, nil
	}, WithWorkers(8))
	require.Eventually(t, func() bool { return tenantOf(t, q, "a").Load == 8 }, 10*time.Second, time.Millisecond)
	var bs []*Future
	for range 20 {
		f, err := q.Submit(ctx, []byte("b"), WithTenant("b"))
		require.NoError(t, err)
		bs = append(bs, f)
	}
	for _, f := range bs {
		_, err := wait(t, f, 20*time.Second)
		require.NoError(t, err)
	}
	left := tenantOf(t, q, "a").Waiting
	t.Logf("a had %d tasks waiting when b's 20 were done", left)
	assert.Greater(t, left, int64(200), "b's tasks waited for a's backlog")
	assert.LessOrEqual(t, p.peakOf("a"), 8)
	assert.LessOrEqual(t, p.peakOf("b"), 8)
}

func TestTenantCapacityChangesAtOnce(t *testing.T) {
	t.Parallel()
	q := open(t, redistest.Name(t))
	ctx := testCtx(t, 30*time.Second)
	require.NoError(t, q.SetTenant(ctx, "a", 3))
	release, free := gate(t)
	var running atomic.Int64
	serve(t, q, func(ctx context.Context, t *Task) ([]byte, error) {
		running.Add(1)
		defer running.Add(-1)
		<-release
		return nil, nil
	}, WithWorkers(6))
	var fs []*Future
	for range 8 {
		f, err := q.Submit(ctx, nil, WithTenant("a"))
		require.NoError(t, err)
		fs = append(fs, f)
	}
	require.Eventually(t, func() bool { return running.Load() == 3 }, 5*time.Second, time.Millisecond)
	// Lower: the 3 in flight go on, nothing more until below 1.
	require.NoError(t, q.SetTenant(ctx, "a", 1))
	// Raise: more come in at once (workers are idle).
	require.NoError(t, q.SetTenant(ctx, "a", 5))
	require.Eventually(t, func() bool { return running.Load() == 5 }, 5*time.Second, time.Millisecond)
	require.NoError(t, q.SetTenant(ctx, "a", 0))
	free()
	// At 0 nothing more runs: 3 of the 8 wait.
	require.Eventually(t, func() bool {
		ti := tenantOf(t, q, "a")
		return ti.Load == 0 && ti.Waiting == 3
	}, 5*time.Second, time.Millisecond)
	require.NoError(t, q.SetTenant(ctx, "a", 1))
	for _, f := range fs {
		_, err := wait(t, f, 10*time.Second)
		require.NoError(t, err)
	}
}

func TestRemovedTenantIsRefusedAndItsTasksStillRun(t *testing.T) {
	t.Parallel()
	q := open(t, redistest.Name(t))
	ctx := testCtx(t, 30*time.Second)
	require.NoError(t, q.SetTenant(ctx, "a", 1))
	f, err := q.Submit(ctx, []byte("x"), WithTenant("a"))
	require.NoError(t, err)
	require.NoError(t, q.RemoveTenant(ctx, "a"))
	ti := tenantOf(t, q, "a")
	assert.True(t, ti.Removed)
	assert.Equal(t, int64(1), ti.Unfinished)
	_, err = q.Submit(ctx, nil, WithTenant("a"))
	assert.ErrorIs(t, err, ErrUnknownTenant)
	_, err = q.Acquire(ctx, "a")
	assert.ErrorIs(t, err, ErrUnknownTenant)
	assert.ErrorIs(t, q.RemoveTenant(ctx, "a"), ErrUnknownTenant)

	serve(t, q, echo, WithWorkers(2))
	res, err := wait(t, f, 5*time.Second)
	require.NoError(t, err)
	assert.Equal(t, "x#1", string(res))
	require.Eventually(t, func() bool {
		all, err := q.Tenants(ctx)
		return err == nil && len(all) == 0
	}, 5*time.Second, time.Millisecond, "a removed tenant is forgotten once its tasks finished")
	n, err := q.rdb.HLen(ctx, q.lay.tenants).Result()
	require.NoError(t, err)
	assert.Zero(t, n, "fields left of a removed tenant")
}

// A made-up tenant creates nothing in Redis, whatever asks for it.
func TestUnknownTenantWritesNothing(t *testing.T) {
	t.Parallel()
	name := redistest.Name(t)
	q := open(t, name)
	ctx := testCtx(t, 20*time.Second)
	before := redistest.Keys(t, q.rdb, "shepherd:{"+name+"}:*")
	_, err := q.Submit(ctx, []byte("x"), WithTenant("made-up"))
	assert.ErrorIs(t, err, ErrUnknownTenant)
	_, err = q.Acquire(ctx, "made-up")
	assert.ErrorIs(t, err, ErrUnknownTenant)
	h := q.Middleware(func(r *http.Request) string { return r.Header.Get("X-Tenant") },
		http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { t.Error("the handler ran for an unknown tenant") }))
	for _, ten := range []string{"made-up", ""} {
		rec := httptest.NewRecorder()
		req := httptest.NewRequest(http.MethodGet, "/", nil)
		req.Header.Set("X-Tenant", ten)
		h.ServeHTTP(rec, req)
		assert.Equal(t, http.StatusForbidden, rec.Code, "tenant %q", ten)
	}
	assert.ErrorIs(t, q.RemoveTenant(ctx, "made-up"), ErrUnknownTenant)
	assert.Equal(t, before, redistest.Keys(t, q.rdb, "shepherd:{"+name+"}:*"), "keys created for an unknown tenant")
	n, err := q.rdb.HLen(ctx, q.lay.tenants).Result()
	require.NoError(t, err)
	assert.Zero(t, n)

	for _, bad := range []string{"", string(make([]byte, MaxTenantIDSize+1))} {
		_, err = q.Submit(ctx, nil, WithTenant(bad))
		assert.ErrorIs(t, err, ErrInvalidOption)
		assert.ErrorIs(t, q.SetTenant(ctx, bad, 1), ErrInvalidOption)
		_, err = q.Acquire(ctx, bad)
		assert.ErrorIs(t, err, ErrInvalidOption)
	}
	assert.ErrorIs(t, q.SetTenant(ctx, "a", -1), ErrInvalidOption)
	assert.ErrorIs(t, q.SetTenant(ctx, "a", MaxCapacity+1), ErrInvalidOption)
}

func TestAcquireSharesTheTenantsCapacity(t *testing.T) {
	t.Parallel()
	name := redistest.Name(t)
	q := open(t, name, WithAcquireWait(200*time.Millisecond))
	ctx := testCtx(t, 30*time.Second)
	require.NoError(t, q.SetTenant(ctx, "a", 2))
	s1, err := q.Acquire(ctx, "a")
	require.NoError(t, err)
	s2, err := q.Acquire(ctx, "a")
	require.NoError(t, err)
	start := time.Now()
	_, err = q.Acquire(ctx, "a")
	assert.ErrorIs(t, err, ErrTenantBusy)
	assert.GreaterOrEqual(t, time.Since(start), 150*time.Millisecond, "Acquire gave up before its wait")
	cctx, cancel := context.WithTimeout(ctx, 20*time.Millisecond)
	_, err = q.Acquire(cctx, "a")
	cancel()
	assert.ErrorIs(t, err, context.DeadlineExceeded)

	// The slots hold the tenant's tasks back.
	var ran atomic.Int64
	serve(t, q, func(ctx context.Context, t *Task) ([]byte, error) { ran.Add(1); return nil, nil }, WithWorkers(2))
	f, err := q.Submit(ctx, nil, WithTenant("a"))
	require.NoError(t, err)
	assert.Never(t, func() bool { return ran.Load() > 0 }, 200*time.Millisecond, 5*time.Millisecond,
		"a task ran while Acquire held the whole capacity")
	require.NoError(t, s1.Release(ctx))
	require.NoError(t, s1.Release(ctx), "Release twice")
	_, err = wait(t, f, 5*time.Second)
	require.NoError(t, err)

	// A waiting Acquire gets the slot a release frees.
	got := make(chan error, 1)
	go func() {
		q2 := open(t, name, WithAcquireWait(5*time.Second))
		s, err := q2.Acquire(ctx, "a")
		if err == nil {
			err = s.Release(ctx)
		}
		got <- err
	}()
	time.Sleep(50 * time.Millisecond)
	s3, err := q.Acquire(ctx, "a") // the last slot
	if errors.Is(err, ErrTenantBusy) {
		s3 = nil // the other took it first
	} else {
		require.NoError(t, err)
	}
	require.NoError(t, s2.Release(ctx))
	if s3 != nil {
		require.NoError(t, s3.Release(ctx))
	}
	require.NoError(t, <-got)
	assert.Zero(t, tenantOf(t, q, "a").Load)
}

func TestMiddlewareAnswers429AtCapacity(t *testing.T) {
	t.Parallel()
	q := open(t, redistest.Name(t), WithAcquireWait(50*time.Millisecond))
	ctx := testCtx(t, 20*time.Second)
	require.NoError(t, q.SetTenant(ctx, "a", 1))
	inside := make(chan struct{})
	release, free := gate(t)
	h := q.Middleware(func(r *http.Request) string { return r.Header.Get("X-Tenant") },
		http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			inside <- struct{}{}
			<-release
			w.WriteHeader(http.StatusNoContent)
		}))
	srv := httptest.NewServer(h)
	defer srv.Close()
	do := func() *http.Response {
		req, _ := http.NewRequest(http.MethodGet, srv.URL, nil)
		req.Header.Set("X-Tenant", "a")
		resp, err := http.DefaultClient.Do(req)
		require.NoError(t, err)
		resp.Body.Close()
		return resp
	}
	first := make(chan *http.Response, 1)
	go func() { first <- do() }()
	awaitSignal(t, inside, "inside")
	resp := do()
	assert.Equal(t, http.StatusTooManyRequests, resp.StatusCode)
	assert.Equal(t, "1", resp.Header.Get("Retry-After"))
	free()
	assert.Equal(t, http.StatusNoContent, (<-first).StatusCode)
	go func() { <-inside }()
	assert.Equal(t, http.StatusNoContent, do().StatusCode, "the slot came back after the first request")
	assert.Zero(t, tenantOf(t, q, "a").Load)
}

func TestUntenantedCapacity(t *testing.T) {
	t.Parallel()
	q := open(t, redistest.Name(t))
	ctx := testCtx(t, 30*time.Second)
	capacity, _, err := q.Untenanted(ctx)
	require.NoError(t, err)
	assert.Equal(t, int64(-1), capacity, "no cap by default")
	require.NoError(t, q.SetUntenantedCapacity(ctx, 2))
	require.NoError(t, q.SetTenant(ctx, "a", 3))
	p := newPeak()
	var fs []*Future
	for i := range 40 {
		var opts []SubmitOption
		payload := "none"
		if i%2 == 0 {
			opts, payload = append(opts, WithTenant("a")), "a"
		}
		f, err := q.Submit(ctx, []byte(payload), opts...)
		require.NoError(t, err)
		fs = append(fs, f)
	}
	serve(t, q, func(ctx context.Context, t *Task) ([]byte, error) {
		p.enter(string(t.Payload))
		defer p.leave(string(t.Payload))
		time.Sleep(3 * time.Millisecond)
		return nil, nil
	}, WithWorkers(8))
	for _, f := range fs {
		_, err := wait(t, f, 20*time.Second)
		require.NoError(t, err)
	}
	assert.Equal(t, 2, p.peakOf("none"), "untenanted capacity")
	assert.Equal(t, 3, p.peakOf("a"))
	capacity, load, err := q.Untenanted(ctx)
	require.NoError(t, err)
	assert.Equal(t, int64(2), capacity)
	assert.Zero(t, load)

	// 0 holds untenanted tasks; no cap lets them all in.
	require.NoError(t, q.SetUntenantedCapacity(ctx, 0))
	f, err := q.Submit(ctx, []byte("none"))
	require.NoError(t, err)
	assert.Never(t, f.isDone, 100*time.Millisecond, 5*time.Millisecond,
		"an untenanted task ran at capacity 0")
	require.NoError(t, q.SetUntenantedCapacity(ctx, -1))
	_, err = wait(t, f, 5*time.Second)
	require.NoError(t, err)
	assert.ErrorIs(t, q.SetUntenantedCapacity(ctx, MaxCapacity+1), ErrInvalidOption)
	all, err := q.Tenants(ctx)
	require.NoError(t, err)
	require.Len(t, all, 1, "untenanted tasks are not a tenant")
}
