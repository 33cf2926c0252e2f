package queue

import (
	"context"
	"fmt"
	"strconv"
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
//	ARGV[4] process, ARGV[5] record (JSON), then per setting (ttl_ms,
//	max_queued, max_dead): name, the process's value, "1" if it set it
//	explicitly
//
// Returns {"OK", fresh, name, value, ...} (fresh is 1 when the queue had
// no settings: new, or Redis lost them) or {"MISMATCH", name, stored,
// the process's value}, when the process set a setting explicitly to
// another value than the stored one while another process is live
// (nothing is written then).
var registerScript = redis.NewScript(member.LuaKeepAlive + member.LuaSettings + prelude + `
local t = now()
local fresh = redis.call('EXISTS', K_SETTINGS) == 0
local live = false
local ttl = redis.call('HGET', K_SETTINGS, '` + settingTTL + `')
if ttl then
  local all = redis.call('HGETALL', K_ALIVE)
  for i = 1, #all, 2 do
    if all[i] ~= ARGV[4] and not lapsed(all[i + 1], t, ttl) then live = true end
  end
end
local out = settle_settings(K_SETTINGS, live, false, 6)
if out[1] ~= 'OK' then return out end
table.insert(out, 2, fresh and 1 or 0)
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
	args := member.SettleArgs(q.lay.commonArgs(q.proc, q.record(q.current())),
		setting(settingTTL, q.cfg.ttl.Milliseconds(), q.cfg.set.ttl),
		setting(settingMaxQueued, int64(q.cfg.maxQueued), q.cfg.set.maxQueued),
		setting(settingMaxDead, int64(q.cfg.maxDead), q.cfg.set.maxDead))
	sent := time.Since(q.started)
	res, err := script.Run(ctx, q.rdb, registerScript, "queue: register", q.lay.common(), args...)
	if err != nil {
		return false, fmt.Errorf("queue: open %q: %w", q.name, err)
	}
	out, _ := res.([]any)
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
	q.leaseFrom.Store(int64(sent))
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
		}
	}
	if !rejoin {
		q.cfg = cfg
		return fresh, nil
	}
	if cfg.ttl != q.cfg.ttl || cfg.maxQueued != q.cfg.maxQueued || cfg.maxDead != q.cfg.maxDead {
		q.logger.Error("the queue's settings changed while this process was cut off; it keeps its own until it restarts",
			"queue_ttl", cfg.ttl, "ttl", q.cfg.ttl, "queue_max_queued", cfg.maxQueued, "max_queued", q.cfg.maxQueued,
			"queue_max_dead_letters", cfg.maxDead, "max_dead_letters", q.cfg.maxDead)
	}
	return fresh, nil
}
