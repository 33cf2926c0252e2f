package queue

import (
	"context"
	"fmt"
	"strconv"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/shepherd-go/shepherd/internal/member"
	"github.com/shepherd-go/shepherd/internal/script"
)

// Queue-wide settings act on the whole queue, not on one process: the TTL
// (every process judges every other by it), MaxQueued and
// MaxDeadLetters (bounds the scripts apply). They are stored with the
// queue (layout.settings) by its first process, so that every process
// uses the same values (DESIGN.md invariant 12). A process that does not
// set one adopts the stored value, whether another process is live or
// not. A process that sets one explicitly to another value is refused
// while another process of the queue is live; when none is (the queue is
// new or dormant), its value replaces the stored one.
const (
	settingTTL       = "ttl_ms"
	settingMaxQueued = "max_queued"
	settingMaxDead   = "max_dead"
)

func settingLabel(name any) string {
	switch name {
	case settingTTL:
		return "TTL (ms)"
	case settingMaxQueued:
		return "MaxQueued"
	case settingMaxDead:
		return "MaxDeadLetters"
	}
	return fmt.Sprint(name)
}

// registerScript registers a process (keep-alive and record) and settles
// the queue-wide settings it must use (member.Setting's rule, the settle
// Lua helper), in one call, so that two processes opening at once cannot
// both find the queue dormant. Another process is live while its
// keep-alive is within the stored TTL.
//
// The shard count is settled apart: it is fixed when the queue is made
// (a queue stored without one has 1), and a process that sets another
// explicitly is refused, live processes or not: the queue's tasks and
// tenants are placed by it.
//
//	ARGV[4] process, ARGV[5] record (JSON), ARGV[6] the process's shard
//	count, ARGV[7] "1" if it set it explicitly, then per setting (ttl_ms,
//	max_queued, max_dead): name, the process's value, "1" if it set it
//	explicitly
//
// Returns {"OK", fresh, name, value, ..., "shards", n} (fresh is 1 when
// the queue had no settings: new, or Redis lost them), {"MISMATCH",
// name, stored, the process's value}, when the process set a setting
// explicitly to another value than the stored one while another process
// is live, or {"SHARDS", stored, the process's}, when it set another
// shard count (nothing is written then).
var registerScript = redis.NewScript(member.LuaKeepAlive + member.LuaSettings + prelude + `
local t = now()
if redis.call('HEXISTS', K_SETTINGS, 'reshard_from') == 1 then return {'RESHARDING'} end
local fresh = redis.call('EXISTS', K_SETTINGS) == 0
local live = false
local ttl = redis.call('HGET', K_SETTINGS, '` + settingTTL + `')
if ttl then
  local all = redis.call('HGETALL', K_ALIVE)
  for i = 1, #all, 2 do
    if all[i] ~= ARGV[4] and not lapsed(all[i + 1], t, ttl) then live = true end
  end
end
local shards = redis.call('HGET', K_SETTINGS, '` + settingShards + `')
if not shards and not fresh then shards = '1' end -- stored before shards were
if shards and shards ~= ARGV[6] and ARGV[7] == '1' then return {'SHARDS', shards, ARGV[6]} end
shards = shards or ARGV[6]
local out = settle_settings(K_SETTINGS, live, false, 8)
if out[1] ~= 'OK' then return out end
redis.call('HSET', K_SETTINGS, '` + settingShards + `', shards)
table.insert(out, 2, fresh and 1 or 0)
out[#out + 1] = '` + settingShards + `'
out[#out + 1] = shards
seen(K_ALIVE, ARGV[4], t)
redis.call('HSET', K_PROCS, ARGV[4], ARGV[5])
return out
`)

// register registers the process and settles the queue-wide settings
// (registerScript); it reports whether the queue had no settings (new, or
// Redis lost them). At Open (rejoin false) the process takes the settings
// it must use. When it registers again (rejoin: it was declared dead, or
// Redis lost the queue), its loops already run with its settings, which
// it keeps: it stores them if the queue lost its own, and logs settings
// that changed meanwhile.
func (q *Queue) register(ctx context.Context, rejoin bool) (fresh bool, err error) {
	setting := func(name string, v int64, explicit bool) member.Setting {
		return member.Setting{Name: name, Value: strconv.FormatInt(v, 10), Explicit: explicit}
	}
	explicitShards := "0"
	if q.cfg.set.shards || rejoin {
		explicitShards = "1" // a process that joined keeps its shards
	}
	args := member.SettleArgs(q.lay.commonArgs(q.proc, q.record(q.current()), q.cfg.shards, explicitShards),
		setting(settingTTL, q.cfg.ttl.Milliseconds(), q.cfg.set.ttl),
		setting(settingMaxQueued, int64(q.cfg.maxQueued), q.cfg.set.maxQueued),
		setting(settingMaxDead, int64(q.cfg.maxDead), q.cfg.set.maxDead))
	sent := time.Since(q.started)
	res, err := script.Run(ctx, q.rdb, registerScript, "queue: register", q.lay.common(), args...)
	if err != nil {
		return false, fmt.Errorf("queue: open %q: %w", q.name, err)
	}
	out, _ := res.([]any)
	if len(out) == 1 && out[0] == "RESHARDING" {
		return false, fmt.Errorf("queue: open %q: it is being resharded (Client.Reshard); open it when that is done", q.name)
	}
	if len(out) == 3 && out[0] == "SHARDS" {
		return false, invalid("the queue %q has %v shards, this process sets %v (the shard count is set when the queue is made; Client.Reshard changes it while the queue is idle)",
			q.name, out[1], out[2])
	}
	if len(out) >= 2 && out[0] == "OK" {
		fresh = out[1] == int64(1)
		out = append([]any{"OK"}, out[2:]...) // settle's reply, without fresh
	}
	use, mm, err := member.Settled(out)
	if err != nil {
		return false, fmt.Errorf("queue: open %q: %w", q.name, err)
	}
	if mm != nil {
		return false, invalid("%s: the queue %q uses %v, this process sets %v (a queue-wide setting; change it on every process while none runs)",
			settingLabel(mm.Name), q.name, mm.Stored, mm.Mine)
	}
	cfg := q.cfg
	for name, raw := range use {
		v, _ := strconv.ParseInt(raw, 10, 64)
		switch name {
		case settingTTL:
			cfg.ttl = time.Duration(v) * time.Millisecond
		case settingMaxQueued:
			cfg.maxQueued = int(v)
		case settingMaxDead:
			cfg.maxDead = int(v)
		case settingShards:
			cfg.shards = int(v)
		}
	}
	if !rejoin {
		all, err := q.makeLayouts(cfg.shards)
		if err != nil {
			return false, err
		}
		q.cfg = cfg
		q.setLayouts(all)
		q.leases = make([]atomic.Int64, len(all))
	}
	lostShards, err := q.joinShards(ctx)
	if err != nil {
		return false, fmt.Errorf("queue: open %q: %w", q.name, err)
	}
	q.leases[0].Store(int64(sent)) // the other shards': joinShard's
	if rejoin && !fresh && len(lostShards) > 0 {
		// The home shard kept its state, these shards did not (their
		// master restarted empty): their unfinished tasks are gone.
		q.logger.Error("queue state lost in some shards (their Redis restarted empty): their unfinished tasks and outcomes are gone", "shards", lostShards)
		q.m.stateLost.Add(ctx, 1, q.m.attrs)
	}
	if !rejoin {
		return fresh, nil
	}
	if cfg.ttl != q.cfg.ttl || cfg.maxQueued != q.cfg.maxQueued || cfg.maxDead != q.cfg.maxDead {
		q.logger.Error("the queue's settings changed while this process was cut off; it keeps its own until it restarts",
			"queue_ttl", cfg.ttl, "ttl", q.cfg.ttl, "queue_max_queued", cfg.maxQueued, "max_queued", q.cfg.maxQueued,
			"queue_max_dead_letters", cfg.maxDead, "max_dead_letters", q.cfg.maxDead)
	}
	return fresh, nil
}

// joinShards registers the process in every shard but the home one (which
// register settled), copying the queue-wide settings there: each shard's
// scripts judge leases and apply bounds by its own copy.
// It returns the shards that held no settings: new, or lost.
func (q *Queue) joinShards(ctx context.Context) (fresh []int, err error) {
	for _, l := range q.known()[1:] {
		f, err := q.joinShard(ctx, l)
		if err != nil {
			return nil, err
		}
		if f {
			fresh = append(fresh, l.shard)
		}
	}
	return fresh, nil
}

// joinShard registers the process in shard l (joinShardScript), and
// renews its lease there; fresh when the shard held no settings.
func (q *Queue) joinShard(ctx context.Context, l layout) (fresh bool, err error) {
	sent := time.Since(q.started)
	res, err := script.Run(ctx, q.rdb, joinShardScript, "queue: join shard", l.common(), l.commonArgs(q.proc,
		settingTTL, q.cfg.ttl.Milliseconds(), settingMaxQueued, q.cfg.maxQueued, settingMaxDead, q.cfg.maxDead,
		settingShards, len(q.known()))...)
	if err != nil {
		return false, fmt.Errorf("shard %d: %w", l.shard, err)
	}
	if q.leases != nil {
		q.leases[l.shard].Store(int64(sent))
	}
	return res == "FRESH", nil
}

// joinShardScript registers a process in a shard other than the home one
// (its keep-alive; its record stays in the home shard), with a copy of
// the queue-wide settings.
//
//	ARGV[4] process, ARGV[5...] the settings: name, value, ...
//
// Returns "OK", or "FRESH" when the shard had no settings (new, or its
// Redis lost them).
var joinShardScript = redis.NewScript(member.LuaKeepAlive + prelude + `
local fresh = redis.call('EXISTS', K_SETTINGS) == 0
local kv = {}
for i = 5, #ARGV do kv[#kv + 1] = ARGV[i] end
redis.call('HSET', K_SETTINGS, unpack(kv))
seen(K_ALIVE, ARGV[4], now())
if fresh then return 'FRESH' end
return 'OK'
`)
