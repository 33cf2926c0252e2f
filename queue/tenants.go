package queue

import (
	"context"
	"fmt"
	"sort"
	"strconv"
	"strings"

	"github.com/redis/go-redis/v9"

	"github.com/shepherd-go/shepherd/internal/script"
)

// The tenants hash (layout.tenants), edited by the scripts and read by
// Tenants and Untenanted, holds "u" the untenanted tasks' capacity (none
// when absent), and per tenant ("" for untenanted tasks: only "l:")
// "c:ID" its capacity, "g:ID" the capacity of a removed tenant whose
// tasks are still unfinished, "l:ID" its load (tasks in flight and slots
// held by Acquire) and "n:ID" its unfinished tasks; a load or count at 0
// is deleted (lower, in the prelude), so the hash holds only what a user
// set while nothing runs. A tenant's waiting tasks are in its own list
// (ready:ID; the untenanted ones in ready; those of a priority above 0 in
// ready/P:ID, counted by "q:ID" while there are some). "r:ID" is its rate
// (Rate.spec) and "rt:ID" the rate's state (take's GCRA), "p:ID" is set
// while it is paused. The queue's own rate ("r", "rt") and pause ("P"),
// and "R", no later than when the first tenant in the rated set may start
// again, are in the settings hash, which take reads with the TTL. A tenant with waiting tasks
// is in the turns list (round-robin order of take), or, when take found
// it at capacity or paused, in the parked set until its load goes down
// or it is resumed, or, when take found it over its rate, in the rated
// set until the rate allows.

// MaxCapacity bounds a tenant's capacity.
const MaxCapacity = 1_000_000

// TenantInfo describes a tenant.
type TenantInfo struct {
	ID         string
	Capacity   int64 // the most tasks in flight and Acquire slots at once
	Load       int64 // tasks in flight and Acquire slots held now
	Waiting    int64 // tasks available now, waiting for their turn or capacity
	Unfinished int64 // tasks submitted and not finished (waiting, delayed, retrying, in flight)
	Removed    bool  // taken off the allow-list; its unfinished tasks still run
	Paused     bool  // PauseTenant: none of its tasks starts until ResumeTenant
	Rate       Rate  // SetTenantRate; the zero Rate when none
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
	all, err := q.layouts(ctx)
	if err != nil {
		return err
	}
	l := tenantLayout(all, id)
	_, err = script.Run(ctx, q.rdb, setTenantScript, "queue: set tenant", l.common(), l.commonArgs(id, capacity)...)
	return err
}

// setTenantScript registers a tenant, or changes its capacity (at once:
// a lower one admits nothing more until its load is below it, a higher
// one lets its waiting tasks in).
//
//	ARGV[4] tenant, ARGV[5] capacity
var setTenantScript = redis.NewScript(prelude + `
local ten = ARGV[4]
redis.call('HSET', K_TEN, 'c:' .. ten, ARGV[5])
redis.call('HDEL', K_TEN, 'g:' .. ten)
if redis.call('SREM', K_PARKED, ten) == 1 then redis.call('RPUSH', K_TURNS, ten) end
if hasWaiting(ten) then wake() end
return 'OK'
`)

// SetUntenantedCapacity caps the tasks submitted without a tenant like a
// tenant's: at most capacity of them in flight at once across the
// cluster (0 holds them), taking turns with the tenants. A negative
// capacity removes the cap (the default). On a queue of n shards the
// untenanted tasks are spread over the shards, and so is the cap: each
// shard gets capacity/n (the first capacity%n one more), so a capacity
// from 1 to n-1 is refused (a shard of share 0 would hold its tasks).
func (q *Client) SetUntenantedCapacity(ctx context.Context, capacity int) error {
	if capacity > MaxCapacity {
		return invalid("capacity must be at most %d, got %d", MaxCapacity, capacity)
	}
	all, err := q.layouts(ctx)
	if err != nil {
		return err
	}
	n := len(all)
	if capacity > 0 && capacity < n {
		return invalid("capacity %d is below the queue's %d shards: each shard needs a share of at least 1 (or 0 to hold them)", capacity, n)
	}
	for i, l := range all {
		arg := ""
		if capacity >= 0 {
			arg = strconv.Itoa(share(capacity, i, n))
		}
		if _, err := script.Run(ctx, q.rdb, setUntenantedScript, "queue: set untenanted capacity", l.common(), l.commonArgs(arg)...); err != nil {
			return err
		}
	}
	return nil
}

// share is shard i's share of v split over n shards: v/n, and one more for
// the first v%n shards.
func share(v, i, n int) int {
	s := v / n
	if i < v%n {
		s++
	}
	return s
}

// setUntenantedScript sets the untenanted tasks' capacity (ARGV[4], or
// "" for none).
var setUntenantedScript = redis.NewScript(prelude + `
if ARGV[4] == '' then
  redis.call('HDEL', K_TEN, 'u')
else
  redis.call('HSET', K_TEN, 'u', ARGV[4])
end
if redis.call('SREM', K_PARKED, '') == 1 then redis.call('RPUSH', K_TURNS, '') end
if redis.call('LLEN', K_READY) > 0 then wake() end
return 'OK'
`)

// Untenanted reports the untenanted tasks' capacity (-1: none) and load.
// On a queue of n shards both add up over the shards (n reads in one
// round trip): the capacity is -1 when no shard has one.
func (q *Client) Untenanted(ctx context.Context) (capacity, load int64, err error) {
	all, err := q.layouts(ctx)
	if err != nil {
		return 0, 0, err
	}
	pipe := q.rdb.Pipeline()
	cmds := make([]*redis.SliceCmd, len(all))
	for i, l := range all {
		cmds[i] = pipe.HMGet(ctx, l.tenants, "u", "l:")
	}
	if _, err := pipe.Exec(ctx); err != nil {
		return 0, 0, fmt.Errorf("queue: untenanted: %w", err)
	}
	capacity = -1
	for _, c := range cmds {
		v := c.Val()
		if s, ok := v[0].(string); ok {
			n, _ := strconv.ParseInt(s, 10, 64)
			capacity = max(capacity, 0) + n
		}
		if s, ok := v[1].(string); ok {
			n, _ := strconv.ParseInt(s, 10, 64)
			load += n
		}
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
	all, err := q.layouts(ctx)
	if err != nil {
		return err
	}
	l := tenantLayout(all, id)
	res, err := script.Run(ctx, q.rdb, removeTenantScript, "queue: remove tenant", l.common(), l.commonArgs(id)...)
	if err != nil {
		return err
	}
	if res == "NOTFOUND" {
		return fmt.Errorf("%w: %q", ErrUnknownTenant, id)
	}
	return nil
}

// removeTenantScript takes a tenant off the allow-list: Submit, Replay
// and Acquire refuse it from now on; its unfinished tasks still run,
// within its last capacity, and it is forgotten when the last finishes.
//
//	ARGV[4] tenant
//
// Returns "OK" or "NOTFOUND".
var removeTenantScript = redis.NewScript(prelude + finishFn + `
local ten = ARGV[4]
local c = redis.call('HGET', K_TEN, 'c:' .. ten)
if not c then return 'NOTFOUND' end
redis.call('HDEL', K_TEN, 'c:' .. ten)
redis.call('HSET', K_TEN, 'g:' .. ten, c)
settle(ten)
return 'OK'
`)

// Tenants lists the registered tenants, and the removed ones whose tasks
// are still unfinished, by id. On a queue of n shards it reads every
// shard's registry (n reads in one round trip; a tenant lives in one
// shard).
func (q *Client) Tenants(ctx context.Context) ([]TenantInfo, error) {
	all, err := q.layouts(ctx)
	if err != nil {
		return nil, err
	}
	return q.tenantsOf(ctx, all)
}

// tenantsOf reads the tenants hash of every shard of all and lists them
// (tenants).
func (q *Client) tenantsOf(ctx context.Context, all []layout) ([]TenantInfo, error) {
	pipe := q.rdb.Pipeline()
	cmds := make([]*redis.MapStringStringCmd, len(all))
	for i, l := range all {
		cmds[i] = pipe.HGetAll(ctx, l.tenants)
	}
	if _, err := pipe.Exec(ctx); err != nil {
		return nil, fmt.Errorf("queue: tenants: %w", err)
	}
	hashes := make([]map[string]string, len(all))
	for i, c := range cmds {
		hashes[i] = c.Val()
	}
	return q.tenants(ctx, all, hashes)
}

// tenants turns the tenants hashes of the shards all (one each) into the
// listing, reading each one's waiting tasks in one pipeline (none without
// tenants). A tenant lives in one shard; should one be found in several
// (counters left in an old shard), its counts add up and its
// registration is the one of the shard it lives in.
func (q *Client) tenants(ctx context.Context, all []layout, hashes []map[string]string) ([]TenantInfo, error) {
	type found struct {
		TenantInfo
		lay   layout
		above int64 // its waiting tasks of a priority above 0
	}
	var list []found
	for s, hash := range hashes {
		for _, t := range shardTenants(hash) {
			above, _ := strconv.ParseInt(hash["q:"+t.ID], 10, 64)
			list = append(list, found{t, all[s], above})
		}
	}
	if len(list) == 0 {
		return []TenantInfo{}, nil
	}
	pipe := q.rdb.Pipeline()
	lens := make([]*redis.IntCmd, len(list))
	for i, t := range list {
		lens[i] = pipe.LLen(ctx, t.lay.tenantReady(t.ID, 0))
	}
	if _, err := pipe.Exec(ctx); err != nil {
		return nil, fmt.Errorf("queue: tenants: %w", err)
	}
	at := map[string]int{} // index in out
	var out []TenantInfo
	for i, f := range list {
		f.Waiting = lens[i].Val() + f.above
		j, ok := at[f.ID]
		if !ok {
			at[f.ID] = len(out)
			out = append(out, f.TenantInfo)
			continue
		}
		t := &out[j]
		load, waiting, unfinished := t.Load+f.Load, t.Waiting+f.Waiting, t.Unfinished+f.Unfinished
		if f.lay.shard == tenantLayout(all, f.ID).shard {
			*t = f.TenantInfo
		}
		t.Load, t.Waiting, t.Unfinished = load, waiting, unfinished
	}
	sort.Slice(out, func(i, j int) bool { return out[i].ID < out[j].ID })
	return out, nil
}

// shardTenants turns one shard's tenants hash into its tenants, by id.
func shardTenants(all map[string]string) []TenantInfo {
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
		case "p":
			get(id).Paused = true
		case "r":
			get(id).Rate = parseRate(v)
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
	return out
}
