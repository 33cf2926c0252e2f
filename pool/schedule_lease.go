package pool

import (
	"context"
	"errors"
	"fmt"

	"github.com/redis/go-redis/v9"
	"github.com/shepherd-go/shepherd/internal/member"
	"github.com/shepherd-go/shepherd/internal/script"
)

// A schedule (or a ticker) is a hash of the pool, plan:NAME (ticker:NAME),
// listed in the set plans (tickers). Its lease is in the hash, a
// member.LuaTokenLease: token (the holder's node id and the lease's
// generation), holder and until (ms, Redis's clock). A lease that lapsed
// is never renewed: whoever takes it next, its former holder included,
// takes a new generation, so a token names one unbroken holding, and
// member.LuaTokenFence refuses the writes of any other.
//
// Fields of plan:NAME: inc (the schedule's incarnation: a schedule
// removed and created again is another), interval (ms), created, gen,
// token, holder, until, last (when the last plan began, ms), and the
// last plan's outcome (recordPlanScript's fields).

// fence is what a planner's writes carry: the schedule's hash and the
// token of the lease it holds. The zero fence does not fence.
type fence struct{ key, token string }

// keyOr returns the fence's key, or for the zero fence a key of the pool
// that stands in (a script's KEYS must be keys of the pool).
func (f fence) keyOr(l layout) string {
	if f.token == "" {
		return l.jobs
	}
	return f.key
}

// errFenced: a planner's write was refused because it no longer holds
// the schedule's lease (it lapsed, another node holds it, or the
// schedule was removed).
var errFenced = errors.New("pool: the schedule's lease was lost: refused")

// createScheduleScript stores a schedule, or updates the interval of the
// one stored.
//
//	KEYS[1] plan:NAME, KEYS[2] plans
//	ARGV[1] name, ARGV[2] interval (ms), ARGV[3] a new incarnation
//
// Returns the schedule's incarnation.
var createScheduleScript = redis.NewScript(member.LuaClock + `
local inc = redis.call("HGET", KEYS[1], "inc")
if inc then
  redis.call("HSET", KEYS[1], "interval", ARGV[2])
  return inc
end
redis.call("HSET", KEYS[1], "inc", ARGV[3], "interval", ARGV[2], "created", now_ms())
redis.call("SADD", KEYS[2], ARGV[1])
return ARGV[3]
`)

// holdScheduleScript takes or renews a schedule's lease and says when
// the next plan is due.
//
//	KEYS[1] plan:NAME
//	ARGV[1] node id, ARGV[2] this node's token ("" for none), ARGV[3]
//	TTL (ms), ARGV[4] the incarnation the node planned for
//
// Returns {"GONE"} (removed, or another incarnation), {"WAIT", ms until
// the holder's lease lapses} or {"HELD", token, ms until the next plan
// is due (≤ 0: due), interval (ms)}.
var holdScheduleScript = redis.NewScript(member.LuaClock + member.LuaTokenLease + `
if redis.call("HGET", KEYS[1], "inc") ~= ARGV[4] then return {"GONE"} end
local now = now_ms()
local token, wait = token_hold(KEYS[1], ARGV[1], ARGV[2], tonumber(ARGV[3]), now)
if not token then return {"WAIT", wait} end
local f = redis.call("HMGET", KEYS[1], "last", "interval")
local interval = tonumber(f[2])
return {"HELD", token, tonumber(f[1] or 0) + interval - now, interval}
`)

// beginPlanScript records that a plan begins now, if the token holds.
//
//	KEYS[1] plan:NAME; ARGV[1] token
//
// Returns 1, or 0 when fenced.
var beginPlanScript = redis.NewScript(member.LuaClock + member.LuaTokenFence + `
if token_fenced(KEYS[1], ARGV[1]) then return 0 end
redis.call("HSET", KEYS[1], "last", now_ms())
return 1
`)

// endScheduleScript removes a schedule: fenced (ErrEndSchedule, from
// its planner) or not (Unschedule).
//
//	KEYS[1] plan:NAME, KEYS[2] plans, KEYS[3] plankeys:NAME
//	ARGV[1] name, ARGV[2] token ("" for Unschedule)
//
// Returns 1, 0 when fenced, or -1 when there is no such schedule.
var endScheduleScript = redis.NewScript(member.LuaClock + member.LuaTokenFence + `
if redis.call("EXISTS", KEYS[1]) == 0 then return -1 end
if token_fenced(KEYS[1], ARGV[2]) then return 0 end
redis.call("DEL", KEYS[1], KEYS[3])
redis.call("SREM", KEYS[2], ARGV[1])
return 1
`)

// Unschedule removes the schedule name of the pool poolName without
// joining it, as Node.Unschedule does. It returns ErrNoSchedule when
// there is none, or an error wrapping ErrInvalidOption for a nil client
// or an invalid pool name.
func Unschedule(ctx context.Context, rdb redis.UniversalClient, poolName, name string) error {
	lay, err := poolLayout(rdb, poolName)
	if err != nil {
		return err
	}
	if err := checkUnitName("schedule", name); err != nil {
		return err
	}
	res, err := script.Run(ctx, rdb, endScheduleScript, "pool: unschedule",
		[]string{lay.plan(name), lay.plans, lay.planKeys(name)}, name, "")
	if err != nil {
		return err
	}
	if res == int64(-1) {
		return fmt.Errorf("%w: schedule %q of pool %q", ErrNoSchedule, name, poolName)
	}
	lays, err := shardLayouts(ctx, rdb, poolName, lay)
	if err == nil {
		err = endInShards(ctx, rdb, lays, name)
	}
	if err != nil {
		return fmt.Errorf("pool: unschedule: removed, but not from every shard: %w", err)
	}
	return nil
}
