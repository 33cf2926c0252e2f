package streaming

import (
	"context"
	"fmt"
	"log/slog"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/shepherd-go/shepherd/internal/member"
	"github.com/shepherd-go/shepherd/internal/script"
)

// members is WithMembers' configuration: the unit whose keep-alives tell
// which of the group's consumers live.
type members struct {
	alive  string        // the unit's keep-alive hash (member: field → last seen, Redis ms)
	prefix string        // a consumer's field is prefix + its name
	ttl    time.Duration // the unit's TTL
}

// WithMembers makes the sink's consumers members of a unit that keeps
// them alive itself, so that one keep-alive says whether a process lives
// (a pool names its router consumers after its nodes). aliveKey is the
// unit's keep-alive hash, in the same Redis Cluster slot as the stream:
// field prefix+consumer name → when the member was last seen (ms, Redis
// TIME, as internal/member writes it); ttl is the unit's TTL. The sink
// then writes no keep-alive of its own, and while it holds the group's
// lease it takes over, at once, the pending entries of every consumer
// whose keep-alive is older than ttl (or missing), delivering them with
// Event.Reclaimed set, and removes the consumer, as TakeOver does. It
// checks every min(ttl/4, 250ms), and its lease lapses after 4 such
// ticks, so that a paused holder hands the work on within about ttl + 1s.
// Entries idle past the ack grace are still reclaimed, as without it.
// The unit must write a member's keep-alive before its sink is created.
// ttl must be positive.
func WithMembers(aliveKey, prefix string, ttl time.Duration) SinkOption {
	return sinkOption(func(c *sinkConfig) error {
		if aliveKey == "" || ttl <= 0 {
			return fmt.Errorf("%w: WithMembers(%q, %q, %v): a key and a positive TTL", ErrInvalidOption, aliveKey, prefix, ttl)
		}
		c.members = &members{alive: aliveKey, prefix: prefix, ttl: ttl}
		return nil
	})
}

// memberTick is how often a sink with members looks for dead ones.
func (m *members) tick() time.Duration {
	return max(min(m.ttl/4, 250*time.Millisecond), time.Millisecond)
}

// holdScript takes or renews the group's lease, for a sink whose unit
// keeps its consumer alive.
//
//	KEYS[1] the group's reclaim lease; ARGV[1] lease token, ARGV[2] TTL (ms)
//
// Returns 1 if the caller holds the lease after the call, else 0.
var holdScript = redis.NewScript(member.Lua + `
return lease_hold(KEYS[1], ARGV[1], ARGV[2]) and 1 or 0
`)

// deadMembersScript looks, while the caller holds the lease, for the
// group's consumers (other than the caller's) whose keep-alive in the
// unit lapsed: it deletes those that own no pending entries and returns
// the others, whose entries the caller takes over.
//
//	KEYS[1] the group's reclaim lease, KEYS[2] the stream, KEYS[3] the
//	unit's keep-alive hash
//	ARGV[1] lease token, ARGV[2] group, ARGV[3] the caller's consumer,
//	ARGV[4] field prefix, ARGV[5] the unit's TTL (ms)
//
// Returns -1 without the lease, else the names of dead consumers that
// own pending entries.
var deadMembersScript = redis.NewScript(member.Lua + `
if not lease_held(KEYS[1], ARGV[1]) then return -1 end
local now = now_ms()
local dead = {}
for _, c in ipairs(redis.call('XINFO', 'CONSUMERS', KEYS[2], ARGV[2])) do
  local info = {}
  for i = 1, #c, 2 do info[c[i]] = c[i + 1] end
  local name = info['name']
  if name ~= ARGV[3] and lapsed(redis.call('HGET', KEYS[3], ARGV[4] .. name), now, ARGV[5]) then
    if tonumber(info['pending']) == 0 then
      redis.call('XGROUP', 'DELCONSUMER', KEYS[2], ARGV[2], name)
    else
      dead[#dead + 1] = name
    end
  end
end
return dead
`)

// maintainMembers is maintain for a sink with members: hold the lease,
// take over the dead members' entries, and reclaim overdue entries once
// per quarter of the grace period.
func (s *Sink) maintainMembers() error {
	ks, m := s.stream.ks, s.cfg.members
	held, err := s.keepAlive(s.ctx)
	if err != nil || !held {
		return err
	}
	res, err := script.Run(s.ctx, s.stream.rdb, deadMembersScript, "streaming.dead members",
		[]string{ks.lease(s.group), ks.stream(), m.alive}, s.token, s.group, s.cfg.consumer, m.prefix, m.ttl.Milliseconds())
	if isNoGroup(err) {
		return s.recreateGroup()
	}
	if err != nil {
		return err
	}
	dead, _ := res.([]any)
	for _, v := range dead {
		name, _ := v.(string)
		n, err := s.takeOverNow(s.ctx, name, s.deliver)
		if err != nil {
			return err
		}
		if n > 0 {
			s.rep.logger.Warn("took over the entries of a consumer whose member is dead",
				append([]any{slog.String("dead_consumer", name), slog.Int("entries", n)}, s.rep.attrs...)...)
		}
	}
	if time.Since(s.lastReclaim) < s.tick() {
		return nil
	}
	s.lastReclaim = time.Now()
	return s.reclaimOrRecreate()
}

// takeOverNow is TakeOver's work for deliver, once this sink has read
// its own pending entries: from the sink's own goroutine it does not
// wait for that read.
func (s *Sink) takeOverNow(ctx context.Context, consumer string, deliver func(*Event) bool) (int, error) {
	select {
	case <-s.ownDone:
	default:
		return 0, nil // next tick
	}
	return s.takeOver(ctx, consumer, deliver)
}
