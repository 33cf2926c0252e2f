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

// dequeue takes up to n tasks; next is when the next delayed task is due
// (-1: none).
func (s *Server) dequeue(ctx context.Context, n int) ([]*Task, time.Duration, error) {
	q := s.q
	cctx, cancel := context.WithTimeout(ctx, loopCallTimeout)
	defer cancel()
	res, err := script.Run(cctx, q.rdb, dequeueScript, "queue: dequeue", q.lay.common(q.lay.inflight(q.proc)),
		q.lay.commonArgs(q.proc, n, promoteLimit)...)
	if err != nil {
		return nil, -1, err
	}
	out, _ := res.([]any)
	return s.taken(ctx, out)
}

// taken reads the reply of take (dequeueScript, or the end of
// completeScript's): the tasks, now marked as running here, and when the
// next delayed task is due.
func (s *Server) taken(ctx context.Context, out []any) ([]*Task, time.Duration, error) {
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
	for i := 2; i+5 < len(out); i += 6 {
		id, _ := out[i].(string)
		payload, _ := out[i+1].(string)
		att, _ := out[i+2].(int64)
		maxAtt, _ := out[i+3].(int64)
		timeout, _ := out[i+4].(int64)
		waited, _ := out[i+5].(int64)
		tasks = append(tasks, &Task{ID: id, Payload: []byte(payload), Attempt: int(att), MaxAttempts: int(maxAtt),
			timeout: time.Duration(timeout) * time.Millisecond})
		r := &run{cancel: func() {}}
		s.mu.Lock()
		if _, ok := s.early[id]; ok {
			r.cancelled.Store(true) // its cancel came first: it does not start
			delete(s.early, id)
		}
		s.running[id] = r
		s.mu.Unlock()
		q.m.queueWait.Record(ctx, float64(max(waited, 0))/1000, q.m.attrs)
	}
	return tasks, next, nil
}

// takeFn is the body of dequeueScript, shared with completeScript.
const takeFn = `
-- take gives the live process proc up to n tasks (see dequeueScript):
-- tenants with waiting tasks take turns, one task a turn (all it may have
-- when it is the only one), and a tenant at capacity is parked until its
-- load goes down.
local function take(proc, ik, n, promote)
  local t = now()
  local why = leaseOf(proc, t)
  if why then return {why} end
  -- The earliest delayed and retrying tasks: the due ones go to the
  -- front of their tenant's list (the first due is taken first).
  local firsts = {}
  for _, z in ipairs({K_RETRY, K_DELAYED}) do
    local first = redis.call('ZRANGE', z, 0, 0, 'WITHSCORES')
    if first[2] and tonumber(first[2]) <= t then
      local due = redis.call('ZRANGEBYSCORE', z, '-inf', t, 'LIMIT', 0, promote)
      local back, order = {}, {}
      for i = #due, 1, -1 do
        local tk = P_TASK .. due[i]
        local ten = redis.call('HGET', tk, F_TENANT) or ''
        redis.call('HSET', tk, F_STATE, 'waiting')
        if not back[ten] then back[ten] = {}; order[#order + 1] = ten end
        back[ten][#back[ten] + 1] = due[i]
      end
      for _, ten in ipairs(order) do pushReady(ten, back[ten], false) end
      bulk('ZREM', z, due)
      first = false -- changed: looked up again if needed
    end
    firsts[z] = first
  end
  local out = {'OK', -1}
  local got = 0
  local mine, owners = {}, {}
  while got < n do
    local ten = redis.call('LPOP', K_TURNS)
    if not ten then break end
    local room = n - got
    local cap = capOf(ten)
    if cap then
      room = math.min(room, cap - tonumber(redis.call('HGET', K_TEN, 'l:' .. ten) or '0'))
    end
    if room <= 0 then
      redis.call('SADD', K_PARKED, ten)
    else
      if redis.call('LLEN', K_TURNS) > 0 then room = 1 end
      local key = readyKey(ten)
      local ids = redis.call('RPOP', key, room) or {}
      local took = 0
      for _, id in ipairs(ids) do
        local tk = P_TASK .. id
        local f = redis.call('HMGET', tk, F_STATE, F_PAYLOAD, F_ATTEMPTS, F_MAX_ATTEMPTS, F_TIMEOUT, F_SUBMITTED, F_DUE)
        if f[1] == 'waiting' then
          local att = tonumber(f[3]) + 1
          redis.call('HSET', tk, F_STATE, 'active', F_ATTEMPTS, att, F_OWNER, proc, F_BEGAN, t)
          took = took + 1
          mine[#mine + 1] = id
          owners[#owners + 1] = id
          owners[#owners + 1] = proc
          local waited = t - math.max(tonumber(f[6]), tonumber(f[7]))
          out[#out + 1] = id
          out[#out + 1] = f[2]
          out[#out + 1] = att
          out[#out + 1] = tonumber(f[4])
          out[#out + 1] = tonumber(f[5])
          out[#out + 1] = waited
        end
      end
      got = got + took
      if took > 0 then redis.call('HINCRBY', K_TEN, 'l:' .. ten, took) end
      if redis.call('LLEN', key) > 0 then redis.call('RPUSH', K_TURNS, ten) end
    end
  end
  bulk('HSET', K_ACTIVE, owners)
  bulk('SADD', ik, mine)
  -- The next due time matters only to a process left with idle workers,
  -- and only such a process needs to be woken when tasks come.
  if (#out - 2) / 6 >= n then
    redis.call('SREM', K_IDLE, proc)
    return out
  end
  redis.call('SADD', K_IDLE, proc)
  local nd = -1
  for _, z in ipairs({K_RETRY, K_DELAYED}) do
    local first = firsts[z]
    if not first then first = redis.call('ZRANGE', z, 0, 0, 'WITHSCORES') end
    if first[2] then
      local d = math.max(tonumber(first[2]) - t, 0)
      if nd < 0 or d < nd then nd = d end
    end
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
// ms, waited ms, ...}: next is in how many ms the earliest delayed or
// retrying task is due (-1: none).
var dequeueScript = redis.NewScript(prelude + takeFn + `
return take(ARGV[4], KEYS[17], tonumber(ARGV[5]), tonumber(ARGV[6]))
`)
