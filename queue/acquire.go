package queue

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"net/http"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/shepherd-go/shepherd/internal/backoff"
	"github.com/shepherd-go/shepherd/internal/script"
)

// DefaultAcquireWait is how long Acquire waits for a slot by default.
const DefaultAcquireWait = 5 * time.Second

// A Slot is one unit of a tenant's capacity taken by Acquire.
type Slot struct {
	q      *Queue
	tenant string
	token  string
	lay    layout // the tenant's shard
	done   atomic.Bool
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
	l := tenantLayout(q.known(), tenant)
	for {
		res, err := script.Run(ctx, q.rdb, acquireScript, "queue: acquire a tenant slot", l.common(),
			l.commonArgs(q.proc, tenant, token)...)
		if err != nil {
			return nil, err
		}
		switch res {
		case "OK":
			return &Slot{q: q, tenant: tenant, token: token, lay: l}, nil
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

// acquireScript takes one slot of a tenant's capacity for the live
// process ARGV[4], held under the token ARGV[6] until released or the
// process is declared dead.
//
//	ARGV[4] process, ARGV[5] tenant, ARGV[6] token
//
// Returns "OK", "BUSY" (at capacity), "UNKNOWN", "GONE" or "LATE" (the
// process is not registered, or its lease ran out).
var acquireScript = redis.NewScript(prelude + `
local proc, ten = ARGV[4], ARGV[5]
local why = leaseOf(proc, now())
if why then return why end
local c = redis.call('HGET', K_TEN, 'c:' .. ten)
if not c then return 'UNKNOWN' end
if tonumber(redis.call('HGET', K_TEN, 'l:' .. ten) or '0') >= tonumber(c) then return 'BUSY' end
redis.call('HINCRBY', K_TEN, 'l:' .. ten, 1)
redis.call('HSET', K_HOLDS, ARGV[6], proc .. '\n' .. ten)
return 'OK'
`)

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
	_, err := script.Run(ctx, q.rdb, releaseScript, "queue: release a tenant slot", s.lay.common(), s.lay.commonArgs(s.token)...)
	if err == nil {
		s.done.Store(true)
	}
	return err
}

// releaseScript gives back the slot held under the token ARGV[4].
//
// Returns "OK", or "GONE" (released already, or its process was declared
// dead and its slots given back).
var releaseScript = redis.NewScript(prelude + finishFn + `
local v = redis.call('HGET', K_HOLDS, ARGV[4])
if not v then return 'GONE' end
redis.call('HDEL', K_HOLDS, ARGV[4])
local _, ten = string.match(v, '^([^\n]*)\n(.*)$')
unload(ten, 1)
return 'OK'
`)

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
