package queue

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"

	"github.com/redis/go-redis/v9"
	"github.com/shepherd-go/shepherd/internal/keys"
	"github.com/shepherd-go/shepherd/internal/redisutil"
)

// Reshard changes the queue's shard count to n (1 to MaxShards) while it
// is idle: no process of it is live (close them all first), and no shard
// holds an unfinished task, a dead letter or an Acquire slot (drain the
// queue, and replay or purge its dead letters). What the queue keeps
// beside its tasks moves to the shards it belongs to under n: the
// tenants (capacity, rate, pause), the untenanted capacity (split
// again), the queue's rate (split again) and pause, the schedules (with
// their last tick). The outcomes of finished tasks, the finished lists,
// the history and the deduplication keys stay where they are: outcomes on
// a shard the queue keeps are still found by Result and Inspect; those on
// the shards a smaller n drops are deleted with those shards. Processes
// then open the queue with WithShards(n), or without WithShards.
//
// It refuses (ErrInvalidOption, nothing written) while the queue is not
// idle, and with ErrQueueNotFound a queue Redis does not hold; the count
// the queue has already is nothing to do. While it runs, Open refuses
// the queue. A process frozen through it (not live, so not in its way)
// is refused when it comes back: restart it. It is not atomic: if it
// fails midway, call it again with the same n (each step is repeated
// safely) before opening the queue.
func (q *Client) Reshard(ctx context.Context, n int) error {
	if n < 1 || n > MaxShards {
		return invalid("shards must be 1 to %d, got %d", MaxShards, n)
	}
	if ok, err := q.Exists(ctx); err != nil {
		return err
	} else if !ok {
		return fmt.Errorf("%w: %q", ErrQueueNotFound, q.name)
	}
	old, err := q.layouts(ctx)
	if err != nil {
		return err
	}
	to, err := q.makeLayouts(n)
	if err != nil {
		return err
	}
	// A reshard that failed midway left the new count stored: the old
	// layouts are the larger set of the two, so that nothing left in a
	// shard is missed.
	from := old
	p, err := q.rdb.HGet(ctx, q.lay.settings, "reshard_from").Int()
	switch {
	case err == nil && p > len(from):
		if from, err = q.makeLayouts(p); err != nil {
			return err
		}
	case err != nil && n == len(old):
		return nil // the count it has, and no reshard left midway
	}
	// The mark first: a process that opens from now on is refused
	// (registerScript) until the reshard is done. A reshard refused below
	// takes it away again, unless one left midway had set it.
	pending := err == nil
	if !pending {
		if err := q.rdb.HSet(ctx, q.lay.settings, "reshard_from", len(from)).Err(); err != nil {
			return fmt.Errorf("queue: reshard: %w", err)
		}
	}
	refuse := func(err error) error {
		if !pending {
			if derr := q.rdb.HDel(context.WithoutCancel(ctx), q.lay.settings, "reshard_from").Err(); derr != nil {
				return errors.Join(err, fmt.Errorf("queue: reshard: the queue stays marked as being resharded (call Reshard again): %w", derr))
			}
		}
		return err
	}
	if err := q.checkIdle(ctx, from); err != nil {
		return refuse(err)
	}
	st, err := q.readMovable(ctx, from)
	if err != nil {
		return refuse(err)
	}
	if st.untenanted > 0 && st.untenanted < n {
		return refuse(invalid("reshard: the untenanted capacity %d is below %d shards (each needs a share of at least 1): raise it, or set 0 or none, first", st.untenanted, n))
	}
	if err := q.writeMovable(ctx, st, to); err != nil {
		return err
	}
	// The count, last: processes that open now find the records in their
	// new shards.
	if err := q.rdb.HSet(ctx, q.lay.settings, settingShards, n).Err(); err != nil {
		return fmt.Errorf("queue: reshard: %w", err)
	}
	if err := q.dropMoved(ctx, st, from, to); err != nil {
		return err
	}
	if err := q.rdb.HDel(ctx, q.lay.settings, "reshard_from").Err(); err != nil {
		return fmt.Errorf("queue: reshard: %w", err)
	}
	q.setLayouts(to)
	return nil
}

// liveProcesses returns the processes of the queue whose keep-alive, in
// any shard, is within the queue's TTL by Redis's clock: those that have
// it open.
func (q *Client) liveProcesses(ctx context.Context, all []layout) ([]string, error) {
	now, err := q.rdb.Time(ctx).Result()
	if err != nil {
		return nil, err
	}
	ttl, err := q.rdb.HGet(ctx, q.lay.settings, settingTTL).Int64()
	if err != nil && err != redis.Nil {
		return nil, err
	}
	var live []string
	for _, l := range all {
		alive, err := q.rdb.HGetAll(ctx, l.alive).Result()
		if err != nil {
			return nil, err
		}
		for proc, at := range alive {
			ms, _ := strconv.ParseInt(at, 10, 64)
			if now.UnixMilli()-ms <= ttl && !slices.Contains(live, proc) {
				live = append(live, proc)
			}
		}
	}
	return live, nil
}

// checkIdle refuses a reshard while a process is live or a shard holds
// unfinished tasks, dead letters or slots.
func (q *Client) checkIdle(ctx context.Context, all []layout) error {
	live, err := q.liveProcesses(ctx, all)
	if err != nil {
		return fmt.Errorf("queue: reshard: %w", err)
	}
	if len(live) > 0 {
		return invalid("reshard: process %s of the queue %q is live: close every process first", live[0], q.name)
	}
	for _, l := range all {
		pipe := q.rdb.Pipeline()
		count := pipe.Get(ctx, l.count)
		dead := pipe.ZCard(ctx, l.dead)
		holds := pipe.HLen(ctx, l.holds)
		if _, err := pipe.Exec(ctx); err != nil && err != redis.Nil {
			return fmt.Errorf("queue: reshard: %w", err)
		}
		if c, _ := count.Int64(); c > 0 {
			return invalid("reshard: shard %d of the queue %q holds %d unfinished tasks: drain it first", l.shard, q.name, c)
		}
		if d := dead.Val(); d > 0 {
			return invalid("reshard: shard %d of the queue %q holds %d dead letters: replay or purge them first", l.shard, q.name, d)
		}
		if h := holds.Val(); h > 0 {
			return invalid("reshard: shard %d of the queue %q holds %d Acquire slots", l.shard, q.name, h)
		}
	}
	return nil
}

// movable is what a reshard carries to the new shards.
type movable struct {
	settings   map[string]string            // the home shard's settings (the queue-wide ones)
	tenants    map[string]map[string]string // tenant → its definition fields (c:, r:, p:), by full field name
	untenanted int                          // the untenanted capacity, -1: none
	rate       string                       // the queue's rate as set ("" none)
	paused     bool
	schedules  map[string]map[string]string // name → its hash, with "" → its version
	from       map[string]int               // tenant or schedule → the shard it was in
}

// tenantFields are the tenants hash's definition fields of a tenant,
// "PREFIX:TENANT"; the others (load, unfinished, waiting, rate state)
// count tasks, none when the queue is idle.
var tenantFields = []string{"c:", "r:", "p:"}

func (q *Client) readMovable(ctx context.Context, all []layout) (movable, error) {
	st := movable{tenants: map[string]map[string]string{}, schedules: map[string]map[string]string{}, from: map[string]int{}, untenanted: -1}
	var err error
	if st.settings, err = q.rdb.HGetAll(ctx, all[0].settings).Result(); err != nil {
		return st, fmt.Errorf("queue: reshard: %w", err)
	}
	st.rate = st.settings["rq"]
	if st.rate == "" {
		st.rate = st.settings["r"]
	}
	st.paused = st.settings["P"] == "1"
	for _, l := range all {
		ten, err := q.rdb.HGetAll(ctx, l.tenants).Result()
		if err != nil {
			return st, fmt.Errorf("queue: reshard: %w", err)
		}
		for f, v := range ten {
			if f == "u" {
				u, _ := strconv.Atoi(v)
				st.untenanted = max(st.untenanted, 0) + u
				continue
			}
			for _, p := range tenantFields {
				if id, ok := strings.CutPrefix(f, p); ok {
					if st.tenants[id] == nil {
						st.tenants[id] = map[string]string{}
					}
					st.tenants[id][f] = v
					st.from["t:"+id] = l.shard
				}
			}
		}
		names, err := q.rdb.HGetAll(ctx, l.schedules).Result()
		if err != nil {
			return st, fmt.Errorf("queue: reshard: %w", err)
		}
		for name, version := range names {
			h, err := q.rdb.HGetAll(ctx, l.schedule(name)).Result()
			if err != nil {
				return st, fmt.Errorf("queue: reshard: %w", err)
			}
			h[""] = version
			st.schedules[name] = h
			st.from["s:"+name] = l.shard
		}
	}
	return st, nil
}

// scheduleShard is the shard of a schedule: its tasks' tenant's, else
// its name's.
func scheduleShard(name, tenant string, n int) int {
	if tenant != "" {
		return shardOfKey(tenant, n)
	}
	return shardOfKey(name, n)
}

func (q *Client) writeMovable(ctx context.Context, st movable, to []layout) error {
	n := len(to)
	r := parseRate(st.rate)
	for _, l := range to {
		pipe := q.rdb.TxPipeline() // one shard's keys: one slot
		copySettings := []any{}
		for _, f := range []string{settingTTL, settingMaxQueued, settingMaxDead} {
			if v, ok := st.settings[f]; ok {
				copySettings = append(copySettings, f, v)
			}
		}
		copySettings = append(copySettings, settingShards, n)
		pipe.HSet(ctx, l.settings, copySettings...)
		if st.paused {
			pipe.HSet(ctx, l.settings, "P", "1")
		} else {
			pipe.HDel(ctx, l.settings, "P")
		}
		pipe.HDel(ctx, l.settings, "rt") // the old split's state
		if r.IsZero() {
			pipe.HDel(ctx, l.settings, "r", "rq")
		} else {
			pipe.HSet(ctx, l.settings, "r", r.shardSpec(n))
			if n > 1 {
				pipe.HSet(ctx, l.settings, "rq", r.spec())
			} else {
				pipe.HDel(ctx, l.settings, "rq")
			}
		}
		if st.untenanted >= 0 {
			pipe.HSet(ctx, l.tenants, "u", share(st.untenanted, l.shard, n))
		} else {
			pipe.HDel(ctx, l.tenants, "u")
		}
		if _, err := pipe.Exec(ctx); err != nil {
			return fmt.Errorf("queue: reshard: shard %d: %w", l.shard, err)
		}
	}
	for id, fields := range st.tenants {
		l := tenantLayout(to, id)
		kv := make([]any, 0, 2*len(fields))
		for f, v := range fields {
			kv = append(kv, f, v)
		}
		if err := q.rdb.HSet(ctx, l.tenants, kv...).Err(); err != nil {
			return fmt.Errorf("queue: reshard: tenant %q: %w", id, err)
		}
	}
	for name, h := range st.schedules {
		l := to[scheduleShard(name, h["ten"], n)]
		kv := make([]any, 0, 2*len(h))
		for f, v := range h {
			if f != "" {
				kv = append(kv, f, v)
			}
		}
		pipe := q.rdb.TxPipeline()
		pipe.HSet(ctx, l.schedule(name), kv...)
		pipe.HSet(ctx, l.schedules, name, h[""])
		if _, err := pipe.Exec(ctx); err != nil {
			return fmt.Errorf("queue: reshard: schedule %q: %w", name, err)
		}
	}
	return nil
}

// dropMoved deletes what moved from the shards it left, and the shards a
// smaller count drops.
func (q *Client) dropMoved(ctx context.Context, st movable, from, to []layout) error {
	n := len(to)
	// The lapsed processes' keep-alives and records: one that was only
	// frozen finds itself gone when it comes back, registers again and is
	// refused (it was opened with the old count).
	for _, l := range from {
		if err := q.rdb.Del(ctx, l.alive, l.procs, l.idle).Err(); err != nil {
			return fmt.Errorf("queue: reshard: %w", err)
		}
	}
	for id, fields := range st.tenants {
		was := st.from["t:"+id]
		if was < n && was == shardOfKey(id, n) {
			continue
		}
		names := make([]string, 0, len(fields))
		for f := range fields {
			names = append(names, f)
		}
		if err := q.rdb.HDel(ctx, from[was].tenants, names...).Err(); err != nil {
			return fmt.Errorf("queue: reshard: %w", err)
		}
	}
	for name, h := range st.schedules {
		was := st.from["s:"+name]
		if was < n && was == scheduleShard(name, h["ten"], n) {
			continue
		}
		pipe := q.rdb.TxPipeline()
		pipe.HDel(ctx, from[was].schedules, name)
		pipe.Del(ctx, from[was].schedule(name))
		if _, err := pipe.Exec(ctx); err != nil {
			return fmt.Errorf("queue: reshard: %w", err)
		}
	}
	for _, l := range from[min(n, len(from)):] {
		if err := q.deleteShard(ctx, l); err != nil {
			return err
		}
	}
	return nil
}

// deleteShard deletes every key of a shard the queue no longer has.
func (q *Client) deleteShard(ctx context.Context, l layout) error {
	sp, err := keys.New(shardName(q.name, l.shard))
	if err == nil {
		err = redisutil.UnlinkMatching(ctx, q.rdb, sp.KindPattern(keys.KindQueue))
	}
	if err != nil {
		return fmt.Errorf("queue: reshard: deleting shard %d: %w", l.shard, err)
	}
	return nil
}
