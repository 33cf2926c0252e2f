package queue

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sort"
	"strconv"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/shepherd-go/shepherd/internal/keys"
)

// Stats is a snapshot of a queue, read in one round trip (two when it has
// tenants), besides a Client's reads of the queue's shard count until it
// knows it.
type Stats struct {
	Available   int64 // waiting, due now (the depth the alarm watches)
	Delayed     int64 // first attempts not due yet
	Retrying    int64 // later attempts not due yet (backoff or RetryLater)
	InFlight    int64 // running now
	Dead        int64 // dead letters kept
	DeadDropped int64 // dead letters dropped at MaxDeadLetters, ever
	Workers     int64 // workers of the live processes
	Busy        int64 // of which running a task
	Paused      bool  // Pause: no task starts until Resume
	Rate        Rate  // SetRate; the zero Rate when none
	Shards      int   // WithShards: the queue's shards
	PerShard    []ShardInfo
	Tenants     []TenantInfo
	Processes   []ProcessInfo
}

// ShardInfo describes one shard of the queue (Stats.PerShard): its part
// of the depths above, and where it lives. An unsharded queue has one.
type ShardInfo struct {
	Shard int    // 0 is the home shard
	Tag   string // its hash tag: NAME, NAME#1, ...
	// Slot is the Redis Cluster hash slot of Tag, which holds every key
	// of the shard (CLUSTER KEYSLOT; `shepherd queue move-shard` moves it
	// to another master). It is computed, also off a cluster.
	Slot int
	// Master is the address of the Redis Cluster master that holds the
	// shard's slot, as the cluster says (CLUSTER SLOTS; the client's own
	// map if that fails); "" off a cluster.
	Master    string
	Available int64
	Delayed   int64
	Retrying  int64
	InFlight  int64
	Dead      int64
	Tenants   int // tenants placed in the shard
}

// ProcessInfo describes one process of the queue.
type ProcessInfo struct {
	ID      string
	Host    string
	PID     int
	Name    string    // WithName's, "" without one
	Started time.Time // the process's own clock
	Workers int       // 0: it only submits
	Busy    int       // as of its last keep-alive
	Limit   int       // its concurrency limit (WithConcurrencyLimit, WithLimit), 0 without one, as of its last keep-alive
	Part    string    // its partition of a shared Limit (WithLimit)
	Drops   int64     // its attempts that counted as drops for the limit, as of its last keep-alive
	Mode    string    // "serve" or "drain" (its Server's Mode), "" when it does not serve; sent at once when it changes
	// P50, P90 and P99 are the percentiles of its handlers' run times over
	// its last Sampled attempts (at most 512), as of its last keep-alive;
	// zero before its first attempt.
	P50, P90, P99 time.Duration
	Sampled       int
	LeaseFor      time.Duration
}

// SubmitOnly reports a process that serves no task: it opened the queue
// to submit (or to watch), and runs no Server.
func (p ProcessInfo) SubmitOnly() bool { return p.Workers == 0 && p.Mode == "" }

// Stats reads the queue's depth by state and its processes. On a queue of
// n shards (WithShards) the depths, dead letters and dropped ones add up
// over the shards (PerShard has each shard's part), and each tenant is
// read in its shard, in the same round trips (n times the reads); the
// processes, the pause and the rate are read in the home shard, where
// every process keeps alive.
func (q *Client) Stats(ctx context.Context) (Stats, error) {
	all, err := q.layouts(ctx)
	if err != nil {
		return Stats{}, err
	}
	type shardCmds struct {
		available, inflight     *redis.IntCmd
		delayed, retrying, dead *redis.IntCmd
		dropped                 *redis.StringCmd
		tenantHash              *redis.MapStringStringCmd
	}
	pipe := q.rdb.Pipeline()
	per := make([]shardCmds, len(all))
	for i, l := range all {
		c := &per[i]
		c.available = pipe.LLen(ctx, l.ready)
		c.delayed = pipe.ZCard(ctx, l.delayed)
		c.retrying = pipe.ZCard(ctx, l.retry)
		c.inflight = pipe.HLen(ctx, l.active)
		c.dead = pipe.ZCard(ctx, l.dead)
		c.dropped = pipe.Get(ctx, l.deadDropped)
	}
	procs := pipe.HGetAll(ctx, q.lay.procs)
	alive := pipe.HGetAll(ctx, q.lay.alive)
	settings := pipe.HMGet(ctx, q.lay.settings, settingTTL, "P", "r", "rq")
	now := pipe.Time(ctx)
	for i, l := range all {
		per[i].tenantHash = pipe.HGetAll(ctx, l.tenants)
	}
	if _, err := pipe.Exec(ctx); err != nil && !errors.Is(err, redis.Nil) {
		return Stats{}, fmt.Errorf("queue: stats: %w", err)
	}
	hashes := make([]map[string]string, len(all))
	for i, c := range per {
		hashes[i] = c.tenantHash.Val()
	}
	tenants, err := q.tenants(ctx, all, hashes)
	if err != nil {
		return Stats{}, err
	}
	var st Stats
	slots := make([]int, len(all))
	for i, l := range all {
		slots[i] = keys.Slot(l.settings)
	}
	masters := q.masters(ctx, all, slots)
	for i, c := range per {
		above, _ := strconv.ParseInt(hashes[i]["q:"], 10, 64)
		si := ShardInfo{Shard: i, Tag: shardName(q.name, i), Slot: slots[i], Master: masters[i],
			Available: c.available.Val() + above, Delayed: c.delayed.Val(), Retrying: c.retrying.Val(),
			InFlight: c.inflight.Val(), Dead: c.dead.Val()}
		dropped, _ := strconv.ParseInt(c.dropped.Val(), 10, 64)
		st.DeadDropped += dropped
		st.PerShard = append(st.PerShard, si)
	}
	for _, t := range tenants {
		si := &st.PerShard[tenantLayout(all, t.ID).shard]
		si.Available += t.Waiting
		si.Tenants++
	}
	for _, si := range st.PerShard {
		st.Available += si.Available
		st.Delayed += si.Delayed
		st.Retrying += si.Retrying
		st.InFlight += si.InFlight
		st.Dead += si.Dead
	}
	sv := settings.Val()
	if len(sv) != 4 {
		sv = make([]any, 4)
	}
	st.Paused = sv[1] != nil
	st.Shards = len(all)
	st.Rate = parseRate(str(sv[2]))
	if rq := str(sv[3]); rq != "" {
		st.Rate = parseRate(rq) // the rate as set: "r" is the home shard's part of it
	}
	st.Tenants = tenants
	nowMs := now.Val().UnixMilli()
	ttlMs, _ := strconv.ParseInt(str(sv[0]), 10, 64)
	for id, raw := range alive.Val() {
		seen, _ := strconv.ParseInt(raw, 10, 64)
		lease := time.Duration(seen+ttlMs-nowMs) * time.Millisecond
		if lease < 0 {
			continue // about to be declared dead
		}
		var r procRecord
		_ = json.Unmarshal([]byte(procs.Val()[id]), &r)
		st.Processes = append(st.Processes, ProcessInfo{ID: id, Host: r.Host, PID: r.PID, Name: r.Name, Started: time.UnixMilli(r.Started),
			Workers: r.Workers, Busy: r.Busy, Limit: r.Limit, Part: r.Part, Drops: r.Drops, Mode: r.Mode, LeaseFor: lease,
			P50: time.Duration(r.P50) * time.Microsecond, P90: time.Duration(r.P90) * time.Microsecond, P99: time.Duration(r.P99) * time.Microsecond,
			Sampled: r.Sampled})
		st.Workers += int64(r.Workers)
		st.Busy += int64(r.Busy)
	}
	sort.Slice(st.Processes, func(i, j int) bool { return st.Processes[i].ID < st.Processes[j].ID })
	return st, nil
}

// masters returns the address of the Redis Cluster master of each shard
// of all, whose slots are slots ("" off a cluster), from the cluster's
// own map of its slots
// (CLUSTER SLOTS, one call). go-redis's copy of that map can be stale:
// a Client that only reads named the dead master after a failover
// (TestEndsRecordedAfterAFailover), go-redis reloading its copy on a
// MOVED reply or once a minute. When the call fails, go-redis's copy.
func (q *Client) masters(ctx context.Context, all []layout, slots []int) []string {
	out := make([]string, len(all))
	cc, ok := q.rdb.(*redis.ClusterClient)
	if !ok {
		return out
	}
	ranges, err := cc.ClusterSlots(ctx).Result()
	if err != nil {
		ranges = nil
	}
	for i, l := range all {
		for _, r := range ranges {
			if slots[i] >= r.Start && slots[i] <= r.End && len(r.Nodes) > 0 {
				out[i] = r.Nodes[0].Addr
			}
		}
		if out[i] == "" {
			if m, err := cc.MasterForKey(ctx, l.settings); err == nil {
				out[i] = m.Options().Addr
			}
		}
	}
	return out
}
