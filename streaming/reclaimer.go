package streaming

import (
	"context"
	"fmt"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/shepherd-go/shepherd/internal/member"
	"github.com/shepherd-go/shepherd/internal/script"
)

// keepAliveScript records that a consumer is alive, in Redis server time,
// and acquires or renews the group's reclaim lease.
//
// KEYS[1] the group's keep-alive hash (consumer -> last seen, ms)
// KEYS[2] the group's reclaim lease
// ARGV[1] consumer name
// ARGV[2] lease token of the caller
// ARGV[3] lease TTL, ms
// ARGV[4] TTL of the keep-alive hash, ms
// Returns 1 if the caller holds the lease after the call, 0 if another
// sink does.
var keepAliveScript = redis.NewScript(member.Lua + `
seen(KEYS[1], ARGV[1], now_ms())
redis.call('PEXPIRE', KEYS[1], ARGV[4])
return lease_hold(KEYS[2], ARGV[2], ARGV[3]) and 1 or 0
`)

// reclaimScript claims entries idle for longer than the grace period for
// the caller, only while the caller holds the lease (the fence: a sink
// that lost its lease, say after a long pause, claims nothing).
//
// KEYS[1] the group's reclaim lease
// KEYS[2] the stream
// ARGV[1] lease token of the caller
// ARGV[2] group
// ARGV[3] consumer that takes the entries
// ARGV[4] minimum idle time, ms
// ARGV[5] cursor: the ID to scan from ("0-0" to start)
// ARGV[6] most entries to claim
// Returns -1 if the caller does not hold the lease, else {next cursor
// ("0-0" when the scan is complete), {{id, {field, value, ...}}, ...}}.
// Since Redis 7, entries deleted from the stream are dropped from the
// pending list by XAUTOCLAIM itself.
var reclaimScript = redis.NewScript(member.Lua + `
if not lease_held(KEYS[1], ARGV[1]) then return -1 end
local r = redis.call('XAUTOCLAIM', KEYS[2], ARGV[2], ARGV[3], ARGV[4], ARGV[5], 'COUNT', ARGV[6])
return {r[1], r[2]}
`)

// sweepScript deletes the group's dead consumers that own no pending
// entries, while the caller holds the lease. A consumer is dead when its
// keep-alive is older than the TTL or, lacking a keep-alive, when Redis
// has not heard from it for longer than the TTL. A dead consumer that
// still owns entries is kept: XGROUP DELCONSUMER would drop its entries
// from the pending list; the reclaim takes them first. Keep-alives of
// consumers that no longer exist are forgotten once lapsed.
//
// KEYS[1] the group's reclaim lease
// KEYS[2] the stream
// KEYS[3] the group's keep-alive hash
// ARGV[1] lease token of the caller
// ARGV[2] group
// ARGV[3] keep-alive TTL, ms
// Returns the number of consumers deleted, or -1 if the caller does not
// hold the lease.
var sweepScript = redis.NewScript(member.Lua + `
if not lease_held(KEYS[1], ARGV[1]) then return -1 end
local now = now_ms()
local ttl = tonumber(ARGV[3])
local deleted = 0
local present = {}
for _, c in ipairs(redis.call('XINFO', 'CONSUMERS', KEYS[2], ARGV[2])) do
  local info = {}
  for i = 1, #c, 2 do info[c[i]] = c[i + 1] end
  local name = info['name']
  present[name] = true
  local at = redis.call('HGET', KEYS[3], name)
  local gone
  if at then
    gone = lapsed(at, now, ttl)
  else
    gone = tonumber(info['idle']) > ttl
  end
  if gone and tonumber(info['pending']) == 0 then
    redis.call('XGROUP', 'DELCONSUMER', KEYS[2], ARGV[2], name)
    redis.call('HDEL', KEYS[3], name)
    deleted = deleted + 1
  end
end
local alive = redis.call('HGETALL', KEYS[3])
for i = 1, #alive, 2 do
  if not present[alive[i]] and lapsed(alive[i + 1], now, ttl) then
    redis.call('HDEL', KEYS[3], alive[i])
  end
end
return deleted
`)

// retireScript removes a closing sink's consumer from its group if it
// owns no pending entries; otherwise it keeps it, so that the entries are
// reclaimed rather than dropped.
//
// KEYS[1] the stream
// KEYS[2] the group's keep-alive hash
// KEYS[3] the group's reclaim lease
// ARGV[1] group
// ARGV[2] consumer
// ARGV[3] lease token of the caller
// Returns 1 if the consumer was deleted, else 0.
var retireScript = redis.NewScript(member.Lua + `
lease_drop(KEYS[3], ARGV[3])
local ok, p = pcall(redis.call, 'XPENDING', KEYS[1], ARGV[1], '-', '+', 1, ARGV[2])
if not ok then
  redis.call('HDEL', KEYS[2], ARGV[2])
  return 0
end
if #p > 0 then return 0 end
redis.call('XGROUP', 'DELCONSUMER', KEYS[1], ARGV[1], ARGV[2])
redis.call('HDEL', KEYS[2], ARGV[2])
return 1
`)

// tick is how often the sink renews its keep-alive and, holding the lease,
// reclaims: a quarter of the grace period, so a keep-alive survives a few
// missed renewals before it lapses.
func (s *Sink) tick() time.Duration { return max(s.cfg.grace/4, time.Millisecond) }

// maintainEvery is how often maintainLoop runs: every tick, or more often
// for a sink with members (WithMembers), which looks for dead ones.
func (s *Sink) maintainEvery() time.Duration {
	if s.cfg.members != nil {
		return min(s.tick(), s.cfg.members.tick())
	}
	return s.tick()
}

// aliveTTL keeps the keep-alive hash from outliving its group for long.
func (s *Sink) aliveTTL() time.Duration { return max(10*s.cfg.grace, time.Minute) }

// keepAlive renews the consumer's keep-alive and reports whether the sink
// holds the reclaim lease. A sink with members keeps no keep-alive of its
// own: its unit does.
func (s *Sink) keepAlive(ctx context.Context) (bool, error) {
	ks := s.stream.ks
	if m := s.cfg.members; m != nil {
		res, err := script.Run(ctx, s.stream.rdb, holdScript, "streaming.lease",
			[]string{ks.lease(s.group)}, s.token, (4 * m.tick()).Milliseconds())
		return res == int64(1), err
	}
	res, err := script.Run(ctx, s.stream.rdb, keepAliveScript, "streaming.keepalive",
		[]string{ks.alive(s.group), ks.lease(s.group)},
		s.cfg.consumer, s.token, s.cfg.grace.Milliseconds(), s.aliveTTL().Milliseconds())
	if err != nil {
		return false, err
	}
	return res == int64(1), nil
}

// maintainLoop keeps the consumer alive and, while holding the lease,
// reclaims overdue entries and sweeps dead consumers, every tick.
func (s *Sink) maintainLoop() {
	t := time.NewTicker(s.maintainEvery())
	defer t.Stop()
	for {
		select {
		case <-s.life.done:
			return
		case <-t.C:
		}
		if err := s.maintain(); err != nil && !s.life.stopping() {
			s.rep.report("streaming: sink keep-alive or reclaim failed; retrying next tick", err)
		}
	}
}

func (s *Sink) maintain() error {
	if s.cfg.members != nil {
		return s.maintainMembers()
	}
	held, err := s.keepAlive(s.ctx)
	if err != nil || !held {
		return err
	}
	if err := s.reclaimOrRecreate(); err != nil {
		return err
	}
	ks := s.stream.ks
	_, err = script.Run(s.ctx, s.stream.rdb, sweepScript, "streaming.sweep",
		[]string{ks.lease(s.group), ks.stream(), ks.alive(s.group)},
		s.token, s.group, s.cfg.grace.Milliseconds())
	if isNoGroup(err) {
		return s.recreateGroup()
	}
	return err
}

// reclaimOrRecreate reclaims (reclaim), and recreates the group when
// Redis lost it (NOGROUP).
func (s *Sink) reclaimOrRecreate() error {
	if err := s.reclaim(); err != nil {
		if !isNoGroup(err) {
			return err
		}
		return s.recreateGroup()
	}
	return nil
}

// reclaim claims every entry idle for longer than the grace period and
// delivers it again.
func (s *Sink) reclaim() error {
	ks := s.stream.ks
	cursor := "0-0"
	for !s.life.stopping() {
		res, err := script.Run(s.ctx, s.stream.rdb, reclaimScript, "streaming.reclaim",
			[]string{ks.lease(s.group), ks.stream()},
			s.token, s.group, s.cfg.consumer, s.cfg.grace.Milliseconds(), cursor, s.cfg.maxPolled)
		if err != nil {
			return err
		}
		next, entries, ok := parseClaim(res)
		if !ok {
			return nil // lease lost: another sink reclaims now
		}
		for _, e := range entries {
			ev := eventFromFields(s.stream.Name(), e.id, e.fields)
			ev.Reclaimed = true
			if !s.deliver(ev) {
				return nil
			}
		}
		if next == "0-0" {
			return nil
		}
		cursor = next
	}
	return nil
}

type claimed struct {
	id     string
	fields []any
}

// parseClaim decodes reclaimScript's reply; ok is false when the lease
// was not held.
func parseClaim(res any) (next string, entries []claimed, ok bool) {
	arr, isArr := res.([]any)
	if !isArr || len(arr) != 2 {
		return "", nil, false
	}
	next, _ = arr[0].(string)
	list, _ := arr[1].([]any)
	for _, item := range list {
		pair, _ := item.([]any)
		if len(pair) != 2 {
			continue // Redis 6.2 returns nil for an entry deleted from the stream
		}
		id, _ := pair[0].(string)
		fields, _ := pair[1].([]any)
		entries = append(entries, claimed{id: id, fields: fields})
	}
	return next, entries, true
}

// retire releases the lease and removes the consumer if it owns nothing.
func (s *Sink) retire(ctx context.Context) error {
	ks := s.stream.ks
	_, err := script.Run(ctx, s.stream.rdb, retireScript, "streaming.retire",
		[]string{ks.stream(), ks.alive(s.group), ks.lease(s.group)},
		s.group, s.cfg.consumer, s.token)
	if err != nil {
		return fmt.Errorf("streaming: close sink %s/%s: %w", s.stream.Name(), s.group, err)
	}
	return nil
}
