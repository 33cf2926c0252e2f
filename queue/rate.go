package queue

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/shepherd-go/shepherd/internal/script"
)

// Rate is a rate limit: at most N task starts in any window of length Per,
// across every process, plus a burst of up to Burst starts after an idle
// spell. A start is a task taken by a worker (an attempt begun); a retry
// starts again, and counts again. The zero Rate means no limit.
//
// The rate is kept by the generic cell rate algorithm (GCRA) on Redis's
// clock, inside the script that takes tasks: starts are spaced Per/N
// apart on average, and up to Burst of them may come at once when the
// rate has been unused for Burst × Per/N. A start that comes late keeps
// its place when it is late by less than half of Per/N, so the next one
// may follow sooner (workers look again after a wait rounded up to the
// millisecond, and would otherwise lose a little of the rate at every
// start). In any window of length Per there are at most N + Burst
// starts. A task over the rate stays in Redis, and the workers are woken
// when the rate allows it: nothing polls.
type Rate struct {
	N     int           // starts per Per, 1 to MaxRateN
	Per   time.Duration // at least a millisecond, whole milliseconds
	Burst int           // 0: the default, N/50 (at least 1); at most N
}

// MaxRateN bounds a Rate's N.
const MaxRateN = 1_000_000

// IsZero tells whether r is the zero Rate (no limit).
func (r Rate) IsZero() bool { return r == Rate{} }

// String renders r as "N/Per" ("500/1s"), with "+Burst" when Burst is
// set, or "none".
func (r Rate) String() string {
	if r.IsZero() {
		return "none"
	}
	s := fmt.Sprintf("%d/%v", r.N, r.Per)
	if r.Burst > 0 {
		s += fmt.Sprintf("+%d", r.Burst)
	}
	return s
}

// EffectiveBurst is the burst r allows: Burst, or when it is 0 the
// default, N/50 and at least 1 (0 for the zero Rate).
func (r Rate) EffectiveBurst() int {
	if r.IsZero() {
		return 0
	}
	if r.Burst > 0 {
		return r.Burst
	}
	return max(1, r.N/50)
}

func (r Rate) validate() error {
	if r.IsZero() {
		return nil
	}
	if r.N < 1 || r.N > MaxRateN {
		return invalid("rate must allow 1 to %d tasks per period, got %d", MaxRateN, r.N)
	}
	if r.Per < time.Millisecond || r.Per%time.Millisecond != 0 {
		return invalid("rate period must be whole milliseconds, at least 1ms, got %v", r.Per)
	}
	if r.Burst < 0 || r.Burst > r.N {
		return invalid("rate burst must be 0 (the default) to N (%d), got %d", r.N, r.Burst)
	}
	return nil
}

// spec is the rate as the take script reads it: "N/PERMS/BURST", "" for
// none.
func (r Rate) spec() string {
	if r.IsZero() {
		return ""
	}
	return fmt.Sprintf("%d/%d/%d", r.N, r.Per.Milliseconds(), r.EffectiveBurst())
}

// parseRate reads a stored spec; the zero Rate for "" or a malformed one.
func parseRate(spec string) Rate {
	parts := strings.Split(spec, "/")
	if len(parts) != 3 {
		return Rate{}
	}
	n, err1 := strconv.Atoi(parts[0])
	ms, err2 := strconv.ParseInt(parts[1], 10, 64)
	b, err3 := strconv.Atoi(parts[2])
	if err1 != nil || err2 != nil || err3 != nil {
		return Rate{}
	}
	r := Rate{N: n, Per: time.Duration(ms) * time.Millisecond}
	if b != r.EffectiveBurst() {
		r.Burst = b
	}
	return r
}

// ParseRate reads a rate written as "N/DURATION" ("500/1s", "10/1m"),
// optionally "+BURST" ("500/1s+25"), or "none" for no limit: the form of
// the CLI, the dashboard and Rate.String. "0" is refused: a capacity of 0
// holds a tenant's tasks, and a rate of 0 must not be read as the
// opposite.
func ParseRate(s string) (Rate, error) {
	s = strings.TrimSpace(s)
	switch s {
	case "none":
		return Rate{}, nil
	case "0", "":
		return Rate{}, invalid("rate %q is ambiguous: none removes the limit; to start nothing, pause", s)
	}
	nPart, rest, ok := strings.Cut(s, "/")
	if !ok {
		return Rate{}, invalid("rate %q: want N/DURATION, like 500/1s, or none", s)
	}
	perPart, burstPart, hasBurst := strings.Cut(rest, "+")
	n, err := strconv.Atoi(nPart)
	if err != nil {
		return Rate{}, invalid("rate %q: %q is not a number of tasks", s, nPart)
	}
	per, err := time.ParseDuration(perPart)
	if err != nil {
		return Rate{}, invalid("rate %q: %v", s, err)
	}
	r := Rate{N: n, Per: per}
	if hasBurst {
		if r.Burst, err = strconv.Atoi(burstPart); err != nil || r.Burst < 1 {
			return Rate{}, invalid("rate %q: burst %q is not a positive number", s, burstPart)
		}
	}
	if r.IsZero() {
		return Rate{}, invalid("rate %q: want N/DURATION with N ≥ 1", s)
	}
	return r, r.validate()
}

// SetRate limits the starts of the queue's tasks, all tenants together,
// to r across every process (the zero Rate removes the limit). It takes
// effect at once; a task over the rate stays waiting. Stored with the
// queue, it holds across restarts of processes (and of Redis, with AOF).
func (q *Client) SetRate(ctx context.Context, r Rate) error {
	if err := r.validate(); err != nil {
		return err
	}
	all, err := q.layouts(ctx)
	if err != nil {
		return err
	}
	for _, l := range all {
		if _, err := script.Run(ctx, q.rdb, setRateScript, "queue: set rate", l.common(), l.commonArgs("", r.shardSpec(len(all)), r.spec())...); err != nil {
			return err
		}
	}
	return nil
}

// shardSpec is the spec of each shard's part of the queue's rate r on n
// shards: N per n×Per (the shards' starts add up to N per Per), with the
// burst split likewise (at least 1 a shard).
func (r Rate) shardSpec(n int) string {
	if r.IsZero() || n == 1 {
		return r.spec()
	}
	return fmt.Sprintf("%d/%d/%d", r.N, r.Per.Milliseconds()*int64(n), max((r.EffectiveBurst()+n-1)/n, 1))
}

// SetTenantRate limits the starts of a registered tenant's tasks to r
// across every process (the zero Rate removes the limit), beside its
// capacity and the queue's rate (SetRate): a task starts when all allow
// it. ErrUnknownTenant when the tenant is not registered.
func (q *Client) SetTenantRate(ctx context.Context, tenant string, r Rate) error {
	if err := validTenant(tenant); err != nil {
		return err
	}
	if err := r.validate(); err != nil {
		return err
	}
	all, err := q.layouts(ctx)
	if err != nil {
		return err
	}
	l := tenantLayout(all, tenant)
	res, err := script.Run(ctx, q.rdb, setRateScript, "queue: set tenant rate", l.common(), l.commonArgs(tenant, r.spec(), r.spec())...)
	if err != nil {
		return err
	}
	if res == "UNKNOWN" {
		return fmt.Errorf("%w: %q", ErrUnknownTenant, tenant)
	}
	return nil
}

// setRateScript sets or removes a rate: the queue's (ARGV[4] "", in the
// settings hash, "r" and its state "rt") or a tenant's (in the tenants
// hash).
//
//	ARGV[4] tenant ("" for the queue), ARGV[5] the spec ("" for none),
//	ARGV[6] the queue's rate as set (on a queue of n shards, each shard
//	applies its part, ARGV[5], and keeps the whole in "rq", for readers)
//
// Returns "OK" or "UNKNOWN" (the tenant is not registered).
var setRateScript = redis.NewScript(prelude + `
local ten, spec = ARGV[4], ARGV[5]
local h, f, tf = K_SETTINGS, 'r', 'rt'
if ten ~= '' then
  if not redis.call('HGET', K_TEN, 'c:' .. ten) then return 'UNKNOWN' end
  h, f, tf = K_TEN, 'r:' .. ten, 'rt:' .. ten
end
if spec == '' then
  redis.call('HDEL', h, f, tf)
else
  redis.call('HSET', h, f, spec)
end
if ten == '' and ARGV[6] ~= spec then
  redis.call('HSET', h, 'rq', ARGV[6])
elseif ten == '' then
  redis.call('HDEL', h, 'rq')
end
if ten ~= '' and redis.call('ZREM', K_RATED, ten) == 1 then redis.call('RPUSH', K_TURNS, ten) end
wake()
return 'OK'
`)

// rateFn is the generic cell rate algorithm of the take script. A rate's
// spec is "N/PERMS/BURST" (Rate.spec); its state is the theoretical
// arrival time (TAT, ms on Redis's clock, fractional) in a field beside
// it, absent or in the past when the rate is unused.
const rateFn = `
-- rate runs the rate spec at t, with tat its stored TAT. Without k it
-- tells how many starts the rate allows: k > 0, or 0 and when to look
-- again (ms): once half the burst is allowed (the next start alone when
-- the burst is 1 or 2), so that a take starts several tasks, and a take
-- that comes late still loses nothing of the rate, within the other
-- half. With k it records k starts in the TAT field of hash key. (One
-- function: every function of a script is made anew on each call.)
local function rate(spec, tat, t, k, key, field)
  local n, per, burst = string.match(spec, '^(%d+)/(%d+)/(%d+)$')
  local T = tonumber(per) / tonumber(n)
  -- A start late by less than T/2 keeps its place (the credit): takes
  -- come after the wait, rounded up to the millisecond, and a lateness
  -- lost every time would leave the rate a few per cent short.
  local at = math.max(tonumber(tat or '0'), t - T / 2)
  if k then
    redis.call('HSET', key, field, string.format('%.3f', at + k * T))
    return
  end
  local tau = (tonumber(burst) - 1) * T
  local room = math.floor((t + tau - at) / T + 1e-9) + 1
  if room <= 0 then return 0, at - tau + math.floor((tonumber(burst) - 1) / 2) * T end
  return room, nil
end
`
