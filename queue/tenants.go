package queue

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"net/http"
	"sort"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"github.com/shepherd-go/shepherd/internal/backoff"
	"github.com/shepherd-go/shepherd/internal/script"
)

// MaxCapacity bounds a tenant's capacity.
const MaxCapacity = 1_000_000

// DefaultAcquireWait is how long Acquire waits for a slot by default.
const DefaultAcquireWait = 5 * time.Second

// TenantInfo describes a tenant.
type TenantInfo struct {
	ID         string
	Capacity   int64 // the most tasks in flight and Acquire slots at once
	Load       int64 // tasks in flight and Acquire slots held now
	Waiting    int64 // tasks available now, waiting for their turn or capacity
	Unfinished int64 // tasks submitted and not finished (waiting, delayed, retrying, in flight)
	Removed    bool  // taken off the allow-list; its unfinished tasks still run
}

// SetTenant registers the tenant id with a capacity, or changes its
// capacity: the most of its tasks in flight (and Acquire slots held) at
// once across every process. It takes effect at once everywhere: a
// higher capacity lets waiting tasks in, a lower one lets the tasks in
// flight finish and admits no more until the load is below it; 0 holds
// the tenant's tasks. Registering is what allows Submit(WithTenant),
// Replay and Acquire for it (an allow-list). A removed tenant set again
// is allowed again.
func (q *Client) SetTenant(ctx context.Context, id string, capacity int) error {
	if err := validTenant(id); err != nil {
		return err
	}
	if capacity < 0 || capacity > MaxCapacity {
		return invalid("capacity must be 0 to %d, got %d", MaxCapacity, capacity)
	}
	_, err := script.Run(ctx, q.rdb, setTenantScript, "queue: set tenant", q.lay.common(), q.lay.commonArgs(id, capacity)...)
	return err
}

// SetUntenantedCapacity caps the tasks submitted without a tenant like a
// tenant's: at most capacity of them in flight at once across the
// cluster (0 holds them), taking turns with the tenants. A negative
// capacity removes the cap (the default).
func (q *Client) SetUntenantedCapacity(ctx context.Context, capacity int) error {
	if capacity > MaxCapacity {
		return invalid("capacity must be at most %d, got %d", MaxCapacity, capacity)
	}
	arg := ""
	if capacity >= 0 {
		arg = strconv.Itoa(capacity)
	}
	_, err := script.Run(ctx, q.rdb, setUntenantedScript, "queue: set untenanted capacity", q.lay.common(), q.lay.commonArgs(arg)...)
	return err
}

// Untenanted reports the untenanted tasks' capacity (-1: none) and load.
func (q *Client) Untenanted(ctx context.Context) (capacity, load int64, err error) {
	v, err := q.rdb.HMGet(ctx, q.lay.tenants, "u", "l:").Result()
	if err != nil {
		return 0, 0, fmt.Errorf("queue: untenanted: %w", err)
	}
	capacity = -1
	if c, ok := v[0].(string); ok {
		capacity, _ = strconv.ParseInt(c, 10, 64)
	}
	if l, ok := v[1].(string); ok {
		load, _ = strconv.ParseInt(l, 10, 64)
	}
	return capacity, load, nil
}

// RemoveTenant takes the tenant id off the allow-list: Submit, Replay
// and Acquire refuse it with ErrUnknownTenant from now on. Its unfinished
// tasks still run, within its last capacity, and Tenants lists it as
// Removed until the last one finishes. ErrUnknownTenant if it is not
// registered.
func (q *Client) RemoveTenant(ctx context.Context, id string) error {
	if err := validTenant(id); err != nil {
		return err
	}
	res, err := script.Run(ctx, q.rdb, removeTenantScript, "queue: remove tenant", q.lay.common(), q.lay.commonArgs(id)...)
	if err != nil {
		return err
	}
	if res == "NOTFOUND" {
		return fmt.Errorf("%w: %q", ErrUnknownTenant, id)
	}
	return nil
}

// Tenants lists the registered tenants, and the removed ones whose tasks
// are still unfinished, by id.
func (q *Client) Tenants(ctx context.Context) ([]TenantInfo, error) {
	all, err := q.rdb.HGetAll(ctx, q.lay.tenants).Result()
	if err != nil {
		return nil, fmt.Errorf("queue: tenants: %w", err)
	}
	return q.tenants(ctx, all)
}

// tenants turns the tenants hash into the listing, reading each one's
// waiting tasks in one pipeline (none without tenants).
func (q *Client) tenants(ctx context.Context, all map[string]string) ([]TenantInfo, error) {
	byID := map[string]*TenantInfo{}
	get := func(id string) *TenantInfo {
		t := byID[id]
		if t == nil {
			t = &TenantInfo{ID: id}
			byID[id] = t
		}
		return t
	}
	for field, v := range all {
		kind, id, ok := strings.Cut(field, ":")
		if !ok || id == "" {
			continue // the untenanted tasks' fields
		}
		n, _ := strconv.ParseInt(v, 10, 64)
		switch kind {
		case "c":
			get(id).Capacity = n
		case "g":
			t := get(id)
			t.Capacity, t.Removed = n, true
		case "l":
			get(id).Load = n
		case "n":
			get(id).Unfinished = n
		}
	}
	out := make([]TenantInfo, 0, len(byID))
	for id, t := range byID {
		if _, c := all["c:"+id]; !c && !t.Removed {
			continue // counters left of a tenant being forgotten
		}
		out = append(out, *t)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].ID < out[j].ID })
	if len(out) > 0 {
		pipe := q.rdb.Pipeline()
		lens := make([]interface{ Val() int64 }, len(out))
		for i, t := range out {
			lens[i] = pipe.LLen(ctx, q.lay.tenantReady(t.ID))
		}
		if _, err := pipe.Exec(ctx); err != nil {
			return nil, fmt.Errorf("queue: tenants: %w", err)
		}
		for i := range out {
			out[i].Waiting = lens[i].Val()
		}
	}
	return out, nil
}

// A Slot is one unit of a tenant's capacity taken by Acquire.
type Slot struct {
	q      *Queue
	tenant string
	token  string
	done   atomic.Bool
}

// Tenant returns the slot's tenant.
func (s *Slot) Tenant() string { return s.tenant }

// Release gives the slot back (once; later calls do nothing, also
// concurrent ones). It returns the Redis error if the release could not be
// sent; Release may be called again, and the slot comes back anyway when
// this process closes or is declared dead.
func (s *Slot) Release(ctx context.Context) error {
	if s.done.Load() {
		return nil
	}
	q := s.q
	// The script gives a token back once, whoever calls it.
	_, err := script.Run(ctx, q.rdb, releaseScript, "queue: release a tenant slot", q.lay.common(), q.lay.commonArgs(s.token)...)
	if err == nil {
		s.done.Store(true)
	}
	return err
}

// Acquire takes one unit of the tenant's capacity for work outside the
// queue (a web request, a job elsewhere), shared with its tasks: while
// held, one task fewer of the tenant runs. It waits while the tenant is
// at capacity, up to WithAcquireWait (5s by default) or until ctx ends,
// then fails with ErrTenantBusy (or ctx's error). ErrUnknownTenant for a
// tenant not registered (nothing is written). The slot is held by this
// process: it comes back by Release, when the Queue closes, or when the
// process is declared dead (its TTL).
func (q *Queue) Acquire(ctx context.Context, tenant string) (*Slot, error) {
	if err := validTenant(tenant); err != nil {
		return nil, err
	}
	if q.isClosed() {
		return nil, ErrClosed
	}
	deadline := time.Now().Add(q.cfg.acquireWait)
	bo := backoff.Backoff{Min: 2 * time.Millisecond, Max: 50 * time.Millisecond}
	token := randomID(12)
	for {
		res, err := script.Run(ctx, q.rdb, acquireScript, "queue: acquire a tenant slot", q.lay.common(),
			q.lay.commonArgs(q.proc, tenant, token)...)
		if err != nil {
			return nil, err
		}
		switch res {
		case "OK":
			return &Slot{q: q, tenant: tenant, token: token}, nil
		case "UNKNOWN":
			q.m.tenantRefused(ctx, "unknown")
			return nil, fmt.Errorf("%w: %q", ErrUnknownTenant, tenant)
		case "GONE", "LATE":
			q.kickKeepAlive()
		case "BUSY":
		default:
			return nil, fmt.Errorf("queue: acquire: unexpected reply %v", res)
		}
		wait := bo.Next()
		wait = wait/2 + rand.N(wait/2+1)
		if time.Now().Add(wait).After(deadline) {
			q.m.tenantRefused(ctx, "busy")
			return nil, fmt.Errorf("%w: %q for %v", ErrTenantBusy, tenant, q.cfg.acquireWait)
		}
		if !backoff.Sleep(wait, ctx.Done()) {
			return nil, ctx.Err()
		}
	}
}

// Middleware runs next for each request within a slot of the request's
// tenant (Acquire), named by tenant(r): 403 Forbidden for an unknown
// tenant (or none), 429 Too Many Requests with Retry-After: 1 when it
// stays at capacity, 503 when Redis fails.
func (q *Queue) Middleware(tenant func(*http.Request) string, next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		id := tenant(r)
		if validTenant(id) != nil {
			http.Error(w, "unknown tenant", http.StatusForbidden)
			return
		}
		slot, err := q.Acquire(r.Context(), id)
		switch {
		case errors.Is(err, ErrUnknownTenant):
			http.Error(w, "unknown tenant", http.StatusForbidden)
			return
		case errors.Is(err, ErrTenantBusy):
			w.Header().Set("Retry-After", "1")
			http.Error(w, "tenant at capacity", http.StatusTooManyRequests)
			return
		case err != nil:
			if r.Context().Err() == nil {
				q.logger.Warn("acquiring a tenant slot for a request failed", "tenant", id, "error", err)
				http.Error(w, "unavailable", http.StatusServiceUnavailable)
			}
			return
		}
		defer func() {
			ctx, cancel := context.WithTimeout(context.WithoutCancel(r.Context()), loopCallTimeout)
			defer cancel()
			if err := slot.Release(ctx); err != nil {
				q.logger.Warn("releasing a tenant slot failed; it comes back when this process closes or is declared dead", "tenant", id, "error", err)
			}
		}()
		next.ServeHTTP(w, r)
	})
}
