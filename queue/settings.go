package queue

import (
	"context"
	"fmt"
	"strconv"
	"time"

	"github.com/redis/go-redis/v9"

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
// the queue-wide settings it must use, in one call, so that two processes
// opening at once cannot both find the queue dormant.
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
var registerScript = redis.NewScript(prelude + `
local t = now()
local fresh = redis.call('EXISTS', K_SETTINGS) == 0
local live = #redis.call('ZRANGEBYSCORE', K_ALIVE, '(' .. t, '+inf', 'LIMIT', 0, 1) > 0
local out, write = {'OK', fresh and 1 or 0}, {}
for i = 6, #ARGV, 3 do
  local name, mine, explicit = ARGV[i], ARGV[i + 1], ARGV[i + 2] == '1'
  local use = redis.call('HGET', K_SETTINGS, name)
  if not use or (explicit and use ~= mine and not live) then
    use = mine
    write[#write + 1] = name
    write[#write + 1] = mine
  elseif explicit and use ~= mine then
    return {'MISMATCH', name, use, mine}
  end
  out[#out + 1] = name
  out[#out + 1] = use
end
if #write > 0 then redis.call('HSET', K_SETTINGS, unpack(write)) end
local ttl = tonumber(redis.call('HGET', K_SETTINGS, 'ttl_ms'))
redis.call('ZADD', K_ALIVE, t + ttl, ARGV[4])
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
	args := q.lay.commonArgs(q.proc, q.record(q.current()))
	mine := []struct {
		name string
		val  int64
		set  bool
	}{
		{settingTTL, q.cfg.ttl.Milliseconds(), q.cfg.set.ttl},
		{settingMaxQueued, int64(q.cfg.maxQueued), q.cfg.set.maxQueued},
		{settingMaxDead, int64(q.cfg.maxDead), q.cfg.set.maxDead},
	}
	for _, s := range mine {
		set := "0"
		if s.set {
			set = "1"
		}
		args = append(args, s.name, strconv.FormatInt(s.val, 10), set)
	}
	sent := time.Since(q.started)
	res, err := script.Run(ctx, q.rdb, registerScript, "queue: register", q.lay.common(), args...)
	if err != nil {
		return false, fmt.Errorf("queue: open %q: %w", q.name, err)
	}
	out, _ := res.([]any)
	if len(out) < 2 {
		return false, fmt.Errorf("queue: open %q: unexpected reply %v", q.name, res)
	}
	if out[0] == "MISMATCH" && len(out) == 4 {
		return false, invalid("%s: the queue %q uses %v, this process sets %v (a queue-wide setting; change it on every process while none runs)",
			settingLabel(out[1]), q.name, out[2], out[3])
	}
	if out[0] != "OK" {
		return false, fmt.Errorf("queue: open %q: unexpected reply %v", q.name, res)
	}
	q.leaseFrom.Store(int64(sent))
	fresh = out[1] == int64(1)
	cfg := q.cfg
	for i := 2; i+1 < len(out); i += 2 {
		name, _ := out[i].(string)
		v, _ := strconv.ParseInt(fmt.Sprint(out[i+1]), 10, 64)
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
