package queue

import (
	"context"
	"fmt"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/shepherd-go/shepherd/internal/script"
)

// record records the ends of a batch of attempts and takes up to n
// tasks, in one script call, tried once; with no ends it is a take alone
// (dequeueScript). recordedEnds tells whether the ends were recorded (the
// call ran): when not, the caller keeps them to try again (a try whose
// call did run but whose reply was lost records them as late the next
// time, and its tasks taken go back by checkOrphans). It returns the
// tasks taken and in how long the next delayed task is due (-1: none).
func (s *Server) record(ctx context.Context, l layout, batch []outcomeReq, n int) (tasks []*Task, next time.Duration, recordedEnds bool, err error) {
	q := s.q
	if len(batch) == 0 {
		tasks, next, err = s.dequeue(ctx, l, n)
		return tasks, next, false, err
	}
	args := l.commonArgs(q.proc, n, promoteLimit)
	for _, o := range batch {
		args = append(args, o.t.ID, o.t.Attempt, o.kind, o.data, o.delay.Milliseconds(), o.stack)
	}
	cctx, cancel := context.WithTimeout(ctx, loopCallTimeout)
	res, err := script.Try(cctx, q.rdb, completeScript, "queue: record outcomes", l.common(l.inflight(q.proc)), args...)
	cancel()
	if err != nil {
		return nil, -1, false, err
	}
	out, _ := res.([]any)
	if len(out) < 2+len(batch) {
		return nil, -1, false, fmt.Errorf("queue: recording outcomes: unexpected reply %v", res)
	}
	for i, st := range out[2 : 2+len(batch)] {
		recorded(batch[i].span, fmt.Sprint(st))
		q.hist.recorded(batch[i].kind, fmt.Sprint(st))
		if st == "STALE" {
			o := batch[i]
			q.logger.Info("an attempt's outcome came too late: the task was given to another process or cancelled", "task", o.t.ID, "attempt", o.t.Attempt)
		}
	}
	if d, _ := out[0].(int64); d > 0 {
		q.droppedDead(context.Background(), d)
	}
	if n == 0 {
		return nil, -1, true, nil
	}
	tasks, next, err = s.taken(ctx, l, out[2+len(batch):])
	return tasks, next, true, err
}

// endUnrecorded ends the spans of attempts whose ends could not be
// recorded (the Queue closed first: deregistering gives the tasks back).
func endUnrecorded(batch []outcomeReq) {
	for _, o := range batch {
		recorded(o.span, "unrecorded")
	}
}

// completeScript records how a batch of attempts ended, each if the
// attempt is still the process's (the task is active, owned by it, at
// this attempt): anything else is a late outcome and is refused. Then it
// takes up to n tasks for the workers that just finished (as
// dequeueScript does), so that a busy worker records an outcome and gets
// its next task in one call.
//
//	KEYS[17] the process's inflight set
//	ARGV[4] process, ARGV[5] n, ARGV[6] promotion limit, then per
//	attempt: id, attempt, kind ("ok", "fail", "perm": no retry, "later":
//	RetryLater, no attempt used, "release": its process stops, back to
//	ready at once, no attempt used), the result ("ok") or the error, the
//	delay (ms) of "fail" and "later", the stack of a panic ("" for none)
//
// Returns {dead letters dropped, k, outcome * k, take's reply...}: one
// outcome per attempt, "STALE", "done", "cancelled", "dead", "retry",
// "later" or "released", then what dequeueScript returns.
var completeScript = redis.NewScript(prelude + finishFn + takeFn + `
local proc = ARGV[4]
local t = now()
local ended = {} -- attempts no longer in flight
local unloads = {} -- tenant → how many of them
local function complete(id, run, attempt, kind, data, delay, stack)
  local tk = P_TASK .. id
  -- What a success needs is in active (inFlight); the other ends read
  -- the rest from the task's record (r).
  local p, att, began, sub, ret, b, ten = inFlight(id, run)
  if p ~= proc or att ~= attempt then return 'STALE', 0 end
  ended[#ended + 1] = id
  unloads[ten] = (unloads[ten] or 0) + 1
  if kind == 'ok' then
    return 'done', finish(tk, id, 'done', t, sub, ret, att, nil, data, ten, b, began)
  end
  local r = rec(id) or {}
  if r[F_CANCEL] == '1' then
    local errs = r[F_ERRORS]
    if kind ~= 'release' then errs = adderr(id, tonumber(att), data, t, stack) end
    return 'cancelled', finish(tk, id, 'cancelled', t, sub, ret, att, errs, nil, ten, b, began)
  end
  -- The task's record holds the attempts before this one (attempts that
  -- do not count leave it so).
  if kind == 'release' then
    readyAgain(ten, id)
    return 'released', 0, true
  end
  local due = t + tonumber(delay)
  if kind == 'later' then
    recSet(id, 'st', 'retry', 'lerr', data, 'due', due)
    redis.call('ZADD', K_RETRY, due, id)
    redis.call('ZADD', P_TRETRY .. ten, due, id)
    return 'later', 0, true
  end
  local errs = adderr(id, tonumber(att), data, t, stack)
  if kind == 'fail' and tonumber(att) < tonumber(r[F_MAX_ATTEMPTS] or '` + defaultMaxField + `') then
    recSet(id, 'st', 'retry', 'att', att, 'due', due)
    redis.call('ZADD', K_RETRY, due, id)
    redis.call('ZADD', P_TRETRY .. ten, due, id)
    return 'retry', 0, true
  end
  local dropped = finish(tk, id, 'dead', t, sub, ret, att, errs, nil, ten, b, began)
  -- A permanent failure says so: the letter did not use up its attempts.
  if kind == 'perm' and redis.call('EXISTS', tk) == 1 then redis.call('HSET', tk, F_PERMANENT, '1') end
  return 'dead', dropped
end
local ids = {}
for i = 7, #ARGV, 6 do ids[#ids + 1] = ARGV[i] end
-- The attempts' values in active, one read for the batch.
local runs = {}
for i = 1, #ids, 1000 do
  for _, v in ipairs(redis.call('HMGET', K_ACTIVE, unpack(ids, i, math.min(i + 999, #ids)))) do runs[#runs + 1] = v end
end
-- Their records, one read for the batch (a task's own hash is read
-- only by an end that needs it: rec).
recLoad(ids, 'later')
local out, dropped, again = {0, 0}, 0, false
for i = 7, #ARGV, 6 do
  local st, d, w = complete(ARGV[i], runs[(i - 1) / 6], ARGV[i + 1], ARGV[i + 2], ARGV[i + 3], ARGV[i + 4], ARGV[i + 5])
  out[#out + 1] = st
  dropped = dropped + d
  again = again or w
end
bulk('HDEL', K_ACTIVE, ended)
bulk('SREM', KEYS[17], ended)
for ten, d in pairs(unloads) do unload(ten, d) end
flush()
out[1] = dropped
out[2] = #out - 2
local n = tonumber(ARGV[5])
if n > 0 then
  for _, v in ipairs(take(proc, KEYS[17], n, tonumber(ARGV[6]), t)) do out[#out + 1] = v end
end
-- A task made available again (a retry, a release) may be for another
-- process's idle workers.
if again then wake() end
return out
`)
