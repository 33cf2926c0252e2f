package queue

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/shepherd-go/shepherd/internal/script"
)

// What a take returns when the process is not registered, or its lease
// ran out: the keep-alive, kicked, sorts it out.
var (
	errGone = errors.New("queue: this process is not registered (declared dead, or Redis lost its state); registering again")
	errLate = errors.New("queue: this process's lease ran out; keeping alive first")
)

// promoteLimit bounds how many due tasks one dequeue moves to ready.
const promoteLimit = 500

// dequeue takes up to n tasks from shard l; next is when the shard's
// next delayed task is due (-1: none). Like record, it tries once
// (script.Try): a shard whose slot is moving between two masters fails
// as a shard that is down does, and the feed goes on with the others.
func (s *Server) dequeue(ctx context.Context, l layout, n int) ([]*Task, time.Duration, error) {
	q := s.q
	cctx, cancel := context.WithTimeout(ctx, loopCallTimeout)
	defer cancel()
	res, err := script.Try(cctx, q.rdb, dequeueScript, "queue: dequeue", l.common(l.inflight(q.proc)),
		l.commonArgs(q.proc, n, promoteLimit)...)
	if err != nil {
		return nil, -1, err
	}
	out, _ := res.([]any)
	return s.taken(ctx, l, out)
}

// taken reads the reply of take (dequeueScript, or the end of
// completeScript's): the tasks, now marked as running here, and when the
// next delayed task is due.
func (s *Server) taken(ctx context.Context, l layout, out []any) ([]*Task, time.Duration, error) {
	q := s.q
	if len(out) < 1 {
		return nil, -1, fmt.Errorf("queue: take: unexpected reply %v", out)
	}
	switch out[0] {
	case "GONE":
		q.kickKeepAlive()
		return nil, -1, errGone
	case "LATE":
		q.kickKeepAlive()
		return nil, -1, errLate
	}
	next := time.Duration(-1)
	if ms, ok := out[1].(int64); ok && ms >= 0 {
		next = time.Duration(ms) * time.Millisecond
	}
	var tasks []*Task
	for i := 2; i+takenFields-1 < len(out); i += takenFields {
		id, _ := out[i].(string)
		payload, _ := out[i+1].(string)
		att, _ := out[i+2].(int64)
		maxAtt, _ := out[i+3].(int64)
		timeout, _ := out[i+4].(int64)
		waited, _ := out[i+5].(int64)
		tenant, _ := out[i+6].(string)
		tc, _ := out[i+7].(string)
		tasks = append(tasks, &Task{ID: id, Payload: []byte(payload), Attempt: int(att), MaxAttempts: int(maxAtt), Tenant: tenant,
			timeout: time.Duration(timeout) * time.Millisecond, trace: tc, q: q, shard: l.shard})
		r := &run{cancel: func() {}, shard: l.shard}
		s.mu.Lock()
		if _, ok := s.early[id]; ok {
			r.cancelled.Store(true) // its cancel came first: it does not start
			delete(s.early, id)
		}
		s.running[id] = r
		s.mu.Unlock()
		q.m.queueWait.Record(ctx, float64(max(waited, 0))/1000, q.m.attrs)
		q.hist.waited(time.Duration(max(waited, 0)) * time.Millisecond)
	}
	return tasks, next, nil
}

// takenFields is how many reply elements take gives per task.
const takenFields = 8

// takeFn is the body of dequeueScript, shared with completeScript.
var takeFn = rateFn + inlineFields(takeLua)

// takeLua is takeFn's take as written (inlineFields).
const takeLua = `
-- take gives the live process proc up to n tasks (see dequeueScript) at
-- t (nil: now):
-- tenants with waiting tasks take turns, one task a turn (all it may have
-- when it is the only one), a tenant's tasks by priority, then in order;
-- a tenant at capacity or paused is parked until its load goes down or it
-- is resumed, one over its rate waits in the rated set until the rate
-- allows. Nothing is taken while the queue is paused, nor beyond the
-- queue's rate.
local function take(proc, ik, n, promote, t)
  t = t or now()
  -- The queue's TTL, pause, rate and its state, and when the first
  -- tenant waiting for its rate may go (R: never later than that, so it
  -- may send take to the rated set for nothing, never too late): the
  -- queue-wide settings, read at once.
  local qf = redis.call('HMGET', K_SETTINGS, '` + settingTTL + `', 'P', 'r', 'rt', 'R')
  local why = leaseOf(proc, t, qf[1])
  if why then return {why} end
  if qf[2] then
    -- Paused: Resume wakes the idle processes.
    redis.call('SADD', K_IDLE, proc)
    return {'OK', -1}
  end
  local want = n
  if qf[3] then
    local k, at = rate(qf[3], qf[4], t)
    if k == 0 then
      redis.call('SADD', K_IDLE, proc)
      return {'OK', math.max(math.ceil(at - t), 1)}
    end
    n = math.min(n, k)
  end
  -- Tenants whose rate allows again get their turn back.
  local rated = qf[5] and tonumber(qf[5])
  if rated and rated <= t then
    local back = redis.call('ZRANGEBYSCORE', K_RATED, '-inf', t)
    bulk('RPUSH', K_TURNS, back)
    bulk('ZREM', K_RATED, back)
    local first = redis.call('ZRANGE', K_RATED, 0, 0, 'WITHSCORES')
    rated = first[2] and tonumber(first[2])
    if rated then redis.call('HSET', K_SETTINGS, 'R', first[2]) else redis.call('HDEL', K_SETTINGS, 'R') end
  end
  -- The earliest delayed and retrying tasks: the due ones go to the
  -- front of their tenant's list (the first due is taken first).
  local firsts = {}
  for _, z in ipairs({K_RETRY, K_DELAYED}) do
    local first = redis.call('ZRANGE', z, 0, 0, 'WITHSCORES')
    if first[2] and tonumber(first[2]) <= t then
      local due = redis.call('ZRANGEBYSCORE', z, '-inf', t, 'LIMIT', 0, promote)
      local back, order, byTen = {}, {}, {}
      recLoad(due)
      for i = #due, 1, -1 do
        local r = rec(due[i])
        if r then
          local ten = r[F_TENANT] or ''
          if not byTen[ten] then byTen[ten] = {} end
          byTen[ten][#byTen[ten] + 1] = due[i]
          local g = ten .. '\n' .. (r[F_PRIORITY] or '0')
          recSet(due[i], F_STATE, 'waiting')
          if not back[g] then back[g] = {}; order[#order + 1] = {r[F_TENANT] or '', tonumber(r[F_PRIORITY] or '0'), g} end
          back[g][#back[g] + 1] = due[i]
        end
      end
      for _, o in ipairs(order) do pushReady(o[1], back[o[3]], false, o[2]) end
      bulk('ZREM', z, due)
      local tz = P_TRETRY
      if z == K_DELAYED then tz = P_TDELAYED end
      for ten, ids in pairs(byTen) do bulk('ZREM', tz .. ten, ids) end
      first = false -- changed: looked up again if needed
    end
    firsts[z] = first
  end
  local out = {'OK', -1}
  local got, ts = 0, nil
  local mine, owners = {}, {}
  while got < n do
    local ten = redis.call('LPOP', K_TURNS)
    if not ten then break end
    local room = n - got
    -- Its capacity (untenanted: "u"), load, removed capacity, pause,
    -- rate, rate state and tasks waiting above priority 0.
    local cf = 'c:' .. ten
    if ten == '' then cf = 'u' end
    local tf = redis.call('HMGET', K_TEN, cf, 'l:' .. ten, 'g:' .. ten, 'p:' .. ten, 'r:' .. ten, 'rt:' .. ten, 'q:' .. ten)
    local cap = tf[1] or tf[3]
    if ten ~= '' and not cap then cap = '0' end
    if cap then room = math.min(room, tonumber(cap) - tonumber(tf[2] or '0')) end
    local rk, rat
    if tf[5] and room > 0 then rk, rat = rate(tf[5], tf[6], t) end
    if tf[4] or room <= 0 then
      redis.call('SADD', K_PARKED, ten)
    elseif rk == 0 then
      redis.call('ZADD', K_RATED, rat, ten)
      if not rated or rat < rated then
        rated = rat
        redis.call('HSET', K_SETTINGS, 'R', string.format('%.3f', rat))
      end
    else
      if rk then room = math.min(room, rk) end
      if redis.call('LLEN', K_TURNS) > 0 then room = 1 end
      -- By priority, highest first, then the default (0).
      local ids = {}
      local above = tonumber(tf[7] or '0')
      if above > 0 then
        local popped = 0
        for p = MAX_PRIORITY, 1, -1 do
          if #ids >= room or popped >= above then break end
          local got_p = redis.call('RPOP', readyKey(ten, p), room - #ids)
          if got_p then
            for _, id in ipairs(got_p) do ids[#ids + 1] = id end
            popped = popped + #got_p
          end
        end
        if popped > 0 then
          lower('q:' .. ten, popped)
          above = above - popped
        end
      end
      -- more: whether its list of priority 0 may hold more (false once a
      -- pop came back short: it is empty).
      local more = true
      if #ids < room then
        local want0 = room - #ids
        local got0 = redis.call('RPOP', readyKey(ten), want0) or {}
        for _, id in ipairs(got0) do ids[#ids + 1] = id end
        more = #got0 == want0
      end
      local took = 0
      recLoad(ids, 'take')
      for _, id in ipairs(ids) do
        local r = recs[id]
        -- (A record without a payload, made by recSet alone, is not a
        -- task.)
        local p = r and recPayload(id)
        if p and r[F_STATE] == 'waiting' then
          -- Absent fields are their defaults (wire.go).
          local att, atts = 1, '1' -- a first attempt: no number to format
          if r[F_ATTEMPTS] then
            att = tonumber(r[F_ATTEMPTS]) + 1
            atts = tostring(att)
          end
          ts = ts or tostring(t)
          -- The attempt lives in active alone (inFlight, in finishFn): the
          -- task's hash is written again when the attempt ends.
          took = took + 1
          mine[#mine + 1] = id
          owners[#owners + 1] = id
          owners[#owners + 1] = proc .. '\n' .. atts .. '\n' .. ts .. '\n' .. (r[F_SUBMITTER] or '') .. '\n' .. (r[F_RETENTION] or '') .. '\n' .. (r[F_BATCH] or '') .. '\n' .. ten
          local since = tonumber(r[F_SUBMITTED])
          if r[F_DUE] then since = math.max(since, tonumber(r[F_DUE])) end
          out[#out + 1] = id
          out[#out + 1] = p
          out[#out + 1] = att
          out[#out + 1] = tonumber(r[F_MAX_ATTEMPTS] or '` + defaultMaxField + `')
          out[#out + 1] = tonumber(r[F_TIMEOUT] or '` + defaultTimeoutField + `')
          out[#out + 1] = t - since
          out[#out + 1] = ten
          out[#out + 1] = r[F_TRACE] or ''
        end
      end
      got = got + took
      if took > 0 then
        redis.call('HINCRBY', K_TEN, 'l:' .. ten, took)
        if rk then rate(tf[5], tf[6], t, took, K_TEN, 'rt:' .. ten) end
      end
      if above > 0 or more and redis.call('LLEN', readyKey(ten)) > 0 then redis.call('RPUSH', K_TURNS, ten) end
    end
  end
  if got > 0 and qf[3] then rate(qf[3], qf[4], t, got, K_SETTINGS, 'rt') end
  bulk('HSET', K_ACTIVE, owners)
  bulk('SADD', ik, mine)
  recSave()
  -- The next due time matters only to a process left with idle workers,
  -- and only such a process needs to be woken when tasks come.
  if got >= want then
    redis.call('SREM', K_IDLE, proc)
    return out
  end
  redis.call('SADD', K_IDLE, proc)
  local nd = -1
  local function sooner(at)
    local d = math.max(math.ceil(at - t), 0)
    if nd < 0 or d < nd then nd = d end
  end
  for _, z in ipairs({K_RETRY, K_DELAYED}) do
    local first = firsts[z]
    if not first then first = redis.call('ZRANGE', z, 0, 0, 'WITHSCORES') end
    if first[2] then sooner(tonumber(first[2])) end
  end
  if rated then sooner(rated) end
  if got >= n and qf[3] then
    -- Stopped by the queue's rate: the next start it allows.
    local _, at = rate(qf[3], redis.call('HGET', K_SETTINGS, 'rt'), t)
    if at then sooner(at) end
  end
  out[2] = nd
  return out
end
`

// dequeueScript gives a live process up to n tasks: it first moves the
// due delayed and retrying tasks (up to ARGV[6] of each) to the front of
// ready, then takes from there.
//
//	KEYS[17] the process's inflight set
//	ARGV[4] process, ARGV[5] n, ARGV[6] promotion limit
//
// Returns {"GONE"} when the process was declared dead (or never
// registered), {"LATE"} when its lease ran out and it has not kept alive
// since, else {"OK", next, id, payload, attempt, max attempts, timeout
// ms, waited ms, tenant, span context ("" for none), ...}: next is in how
// many ms the earliest delayed or retrying task is due, or its tenant's
// or the queue's rate allows a start (-1: none).
var dequeueScript = redis.NewScript(prelude + takeFn + `
return take(ARGV[4], KEYS[17], tonumber(ARGV[5]), tonumber(ARGV[6]))
`)
