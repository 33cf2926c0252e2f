package queue

import "github.com/redis/go-redis/v9"

// Every script takes the queue's common keys first (layout.common):
//
//	KEYS[1] settings, KEYS[2] ready, KEYS[3] delayed, KEYS[4] retry,
//	KEYS[5] active, KEYS[6] dead, KEYS[7] count, KEYS[8] deaddropped,
//	KEYS[9] alive, KEYS[10] procs, KEYS[11] withdrawn, KEYS[12] idle,
//	KEYS[13] tenants, KEYS[14] turns, KEYS[15] parked, KEYS[16] holds
//	ARGV[1] task key prefix, ARGV[2] inflight key prefix, ARGV[3] channel
//	prefix
//
// then its own, listed in its comment. A task's key is the prefix and its
// id, under the same hash tag, so the scripts that find ids in a list or
// set (dequeue, reap, purge) build it themselves.
//
// A task hash holds: p payload, st state (waiting, delayed, retry,
// active, done, dead, cancelled), att attempts begun, max max attempts,
// to per-attempt timeout (ms), sub the submitting process, own the
// process running it, ret retention (ms), enq submitted at, due due at,
// beg last attempt began at, fin finished at (ms, Redis's clock), errs
// the attempts' errors (JSON list of {a, e, t, s}: s the stack of the
// latest panic, on its attempt only), lerr the last RetryLater error, res
// the result, cx "1" once cancelled while running, ten the tenant (""
// for none).
//
// Tenants (layout.go): the tenants hash holds "u" the untenanted tasks'
// capacity (none when absent), and per tenant ("" for untenanted tasks:
// only "l:") "c:ID" its capacity, "g:ID" the capacity of a removed tenant whose tasks are still
// unfinished, "l:ID" its load (tasks in flight and slots held by
// Acquire) and "n:ID" its unfinished tasks; a load or count at 0 is
// deleted (lower), so the hash holds only what a user set while nothing
// runs. Its waiting tasks are in its
// own list (ready:ID; the untenanted ones in ready). A tenant with
// waiting tasks is either in the turns list (round-robin order of take)
// or, when take found it at capacity, in the parked set, until its load
// goes down.
//
// Every time comes from Redis TIME: one clock for due times and leases.
const prelude = `
local K_SETTINGS, K_READY, K_DELAYED, K_RETRY, K_ACTIVE = KEYS[1], KEYS[2], KEYS[3], KEYS[4], KEYS[5]
local K_DEAD, K_COUNT, K_DROPPED, K_ALIVE, K_PROCS = KEYS[6], KEYS[7], KEYS[8], KEYS[9], KEYS[10]
local K_WITHDRAWN, K_IDLE = KEYS[11], KEYS[12]
local K_TEN, K_TURNS, K_PARKED, K_HOLDS = KEYS[13], KEYS[14], KEYS[15], KEYS[16]
local P_TASK, P_INFLIGHT, P_CHAN = ARGV[1], ARGV[2], ARGV[3]
local P_BATCH = string.sub(P_TASK, 1, -6) .. 'batch:' -- beside task:, see layout.go
local P_BTASKS = string.sub(P_TASK, 1, -6) .. 'btasks:'

local function now()
  local t = redis.call('TIME')
  return tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
end

-- wake tells the processes left with idle workers by their last take
-- that tasks may be available.
local woke = false
local function wake()
  if woke then return end
  woke = true
  if redis.call('EXISTS', K_IDLE) == 1 then redis.call('PUBLISH', P_CHAN .. 'wake', '') end
end

-- adderr appends an attempt's error, and the stack of its panic if any,
-- to the task's list and returns it. A task keeps its latest panic's
-- stack only (a few KiB at most), not one per attempt.
local function adderr(tk, errs, att, msg, t, stack)
  local list = {}
  if errs and errs ~= '' then list = cjson.decode(errs) end
  local e = {a = att, e = msg, t = t}
  if stack and stack ~= '' then
    for _, old in ipairs(list) do old.s = nil end
    e.s = stack
  end
  list[#list + 1] = e
  local s = cjson.encode(list)
  redis.call('HSET', tk, 'errs', s)
  return s
end

-- bulk runs cmd on key with the list's items as arguments, in chunks
-- (unpack has a limit).
local function bulk(cmd, key, list)
  for i = 1, #list, 1000 do
    redis.call(cmd, key, unpack(list, i, math.min(i + 999, #list)))
  end
end

-- lower takes d from a counter field of the tenants hash (a tenant's
-- load "l:ID" or unfinished tasks "n:ID"; "l:" for untenanted tasks). A
-- counter back at 0 is deleted: the hash holds the capacities, and
-- counters only while they count something, so a queue with no tenant
-- and nothing in flight has no tenants hash.
local function lower(field, d)
  if redis.call('HINCRBY', K_TEN, field, -d) <= 0 then redis.call('HDEL', K_TEN, field) end
end

-- uncount takes n tasks (finished, or withdrawn) off the unfinished
-- count; at 0 the key is deleted, so a queue with nothing unfinished
-- keeps no count (readers take a missing count for 0).
local function uncount(n)
  if redis.call('INCRBY', K_COUNT, -n) <= 0 then redis.call('DEL', K_COUNT) end
end

-- readyKey is the list of a tenant's waiting tasks.
local function readyKey(ten)
  if ten == '' then return K_READY end
  return K_READY .. ':' .. ten
end

-- pushReady puts ids in a tenant's waiting list, on the left (taken
-- last, in order) or on the right (taken first, the last id first), and
-- gives the tenant a turn if it had no waiting task.
local function pushReady(ten, ids, left)
  if #ids == 0 then return end
  local key = readyKey(ten)
  local before = redis.call('LLEN', key)
  if left then bulk('LPUSH', key, ids) else bulk('RPUSH', key, ids) end
  if before == 0 then redis.call('RPUSH', K_TURNS, ten) end
end

-- unready removes a waiting task from its tenant's list; a tenant left
-- with none loses its turn.
local function unready(ten, id)
  local key = readyKey(ten)
  redis.call('LREM', key, 1, id)
  if redis.call('LLEN', key) == 0 then
    redis.call('LREM', K_TURNS, 0, ten)
    redis.call('SREM', K_PARKED, ten)
  end
end

-- capOf is a tenant's capacity (a removed one's last while it drains);
-- for untenanted tasks ("") the untenanted capacity, nil when none.
local function capOf(ten)
  if ten == '' then
    local u = redis.call('HGET', K_TEN, 'u')
    if not u then return nil end
    return tonumber(u)
  end
  local c = redis.call('HGET', K_TEN, 'c:' .. ten) or redis.call('HGET', K_TEN, 'g:' .. ten)
  return tonumber(c or '0')
end

-- settle forgets a removed tenant once nothing of it is left.
local function settle(ten)
  if ten == '' or not redis.call('HGET', K_TEN, 'g:' .. ten) then return end
  local f = redis.call('HMGET', K_TEN, 'l:' .. ten, 'n:' .. ten)
  if tonumber(f[1] or '0') <= 0 and tonumber(f[2] or '0') <= 0 then
    redis.call('HDEL', K_TEN, 'g:' .. ten, 'l:' .. ten, 'n:' .. ten)
  end
end

-- unload takes d from a tenant's load; a parked tenant gets its turn
-- back (take parks it again if it is still at capacity).
local function unload(ten, d)
  lower('l:' .. ten, d)
  if redis.call('SREM', K_PARKED, ten) == 1 then
    redis.call('RPUSH', K_TURNS, ten)
    wake()
  end
  settle(ten)
end

-- releaseHolds gives back the Acquire slots held by the processes procs
-- (declared dead, or closing).
local function releaseHolds(procs)
  local gone = {}
  for _, p in ipairs(procs) do gone[p] = true end
  local all = redis.call('HGETALL', K_HOLDS)
  for i = 1, #all, 2 do
    local p, ten = string.match(all[i + 1], '^([^\n]*)\n(.*)$')
    if p and gone[p] then
      redis.call('HDEL', K_HOLDS, all[i])
      unload(ten, 1)
    end
  end
end

` + fileDeadFn + `
-- finish records a final outcome (done, dead or cancelled). A dead letter
-- is kept (with its payload, for replay) in the dead set (fileDead, in
-- dead.go); other outcomes expire after the task's retention. The
-- submitting process is told by flush, which every script that calls
-- finish runs before it returns. Returns how many dead letters were
-- dropped.
local notes, nfinished = {}, 0
local cancelRest
local function finish(tk, id, st, t, sub, ret, att, errs, res, ten)
  if ten and ten ~= '' then
    lower('n:' .. ten, 1)
    settle(ten)
  end
  local b = redis.call('HGET', tk, 'b')
  if b and b ~= '' then
    local bk = P_BATCH .. b
    redis.call('HINCRBY', bk, 'done', 1)
    if st ~= 'done' and not redis.call('HGET', bk, 'first') then
      redis.call('HSET', bk, 'first', id)
      if redis.call('HGET', bk, 'pol') == 'ff' then cancelRest(b, id, t) end
    end
    local c = redis.call('HMGET', bk, 'n', 'done')
    if tonumber(c[2]) >= tonumber(c[1] or '0') then
      -- Every task finished: the batch is kept as long as this outcome.
      redis.call('PEXPIRE', bk, ret)
      redis.call('PEXPIRE', P_BTASKS .. b, ret)
    end
  end
  local f = {'HSET', tk, 'st', st, 'fin', t, 'own', ''}
  if res then f[#f + 1] = 'res'; f[#f + 1] = res end
  if st ~= 'dead' then f[#f + 1] = 'p'; f[#f + 1] = '' end
  redis.call(unpack(f))
  nfinished = nfinished + 1
  local dropped = 0
  if st == 'dead' then
    dropped = fileDead(id, t)
  else
    redis.call('PEXPIRE', tk, ret)
  end
  errs, res = errs or '', res or ''
  local n = notes[sub]
  if not n then n = {}; notes[sub] = n end
  n[#n + 1] = #id .. '\n' .. st .. '\n' .. att .. '\n' .. #errs .. '\n' .. #res .. '\n' .. id .. errs .. res
  return dropped
end

-- cancelOne cancels the task id: one not running gets its outcome at
-- once; one running is marked, and its process told to end the
-- handler's ctx (the outcome is recorded when the attempt ends; a
-- success still wins). Returns "NOTFOUND", "FINISHED", "REQUESTED" or
-- "CANCELLED".
local function cancelOne(tk, id, t)
  local f = redis.call('HMGET', tk, 'st', 'own', 'att', 'sub', 'ret', 'errs', 'ten')
  local st = f[1]
  if not st then return 'NOTFOUND' end
  if st == 'done' or st == 'dead' or st == 'cancelled' then return 'FINISHED' end
  if st == 'active' then
    redis.call('HSET', tk, 'cx', '1')
    redis.call('PUBLISH', P_CHAN .. 'cancel:' .. f[2], id)
    return 'REQUESTED'
  end
  if st == 'waiting' then
    unready(f[7] or '', id)
  elseif st == 'delayed' then
    redis.call('ZREM', K_DELAYED, id)
  else
    redis.call('ZREM', K_RETRY, id)
  end
  finish(tk, id, 'cancelled', t, f[4], f[5], tonumber(f[3]), f[6], nil, f[7] or '')
  return 'CANCELLED'
end

-- cancelRest cancels the tasks of batch b other than except (a
-- fail-fast batch whose task except failed).
cancelRest = function(b, except, t)
  for _, sid in ipairs(redis.call('LRANGE', P_BTASKS .. b, 0, -1)) do
    if sid ~= except then cancelOne(P_TASK .. sid, sid, t) end
  end
end

-- flush counts the finished tasks out and sends each submitting process
-- one message with its outcomes (see Queue.outcomeMessage).
local function flush()
  if nfinished > 0 then uncount(nfinished) end
  for sub, n in pairs(notes) do
    redis.call('PUBLISH', P_CHAN .. 'done:' .. sub, table.concat(n))
  end
end
`

// takeFn is the body of dequeueScript, shared with completeScript.
const takeFn = `
-- take gives the live process proc up to n tasks (see dequeueScript):
-- tenants with waiting tasks take turns, one task a turn (all it may have
-- when it is the only one), and a tenant at capacity is parked until its
-- load goes down.
local function take(proc, ik, n, promote)
  local t = now()
  local exp = redis.call('ZSCORE', K_ALIVE, proc)
  if not exp then return {'GONE'} end
  if tonumber(exp) < t then return {'LATE'} end
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
        local ten = redis.call('HGET', tk, 'ten') or ''
        redis.call('HSET', tk, 'st', 'waiting')
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
        local f = redis.call('HMGET', tk, 'st', 'p', 'att', 'max', 'to', 'enq', 'due')
        if f[1] == 'waiting' then
          local att = tonumber(f[3]) + 1
          redis.call('HSET', tk, 'st', 'active', 'att', att, 'own', proc, 'beg', t)
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

// submitScript queues a batch of tasks, each on its own: one refused
// does not stop the others.
//
//	ARGV[4] submitting process, ARGV[5] max queued, then per task: id,
//	payload, max attempts, timeout (ms), delay (ms, 0: now), retention
//	(ms), the Submit's nonce, the tenant ("" for none), the batch ("" for
//	none) and its policy ("ff" fail-fast, "ca" collect-all)
//
// Returns one status per task: "OK", "DUP" (the id is known), "FULL",
// "UNKNOWN" (the tenant is not registered), "BATCHFAILED" (its fail-fast
// batch failed already) or "WITHDRAWN" (its Submit failed and withdrew it
// before it got here); a refused task writes nothing.
var submitScript = redis.NewScript(prelude + `
local t = now()
local count = tonumber(redis.call('GET', K_COUNT) or '0')
local limit = tonumber(ARGV[5])
local withdrawn = redis.call('EXISTS', K_WITHDRAWN) == 1
local out, ready, order, delayed, queued = {}, {}, {}, {}, 0
for i = 6, #ARGV, 10 do
  local id, ten, b = ARGV[i], ARGV[i + 7], ARGV[i + 8]
  local tk = P_TASK .. id
  if withdrawn and redis.call('ZSCORE', K_WITHDRAWN, ARGV[i + 6]) then
    out[#out + 1] = 'WITHDRAWN'
  elseif ten ~= '' and not redis.call('HGET', K_TEN, 'c:' .. ten) then
    out[#out + 1] = 'UNKNOWN'
  elseif b ~= '' and ARGV[i + 9] == 'ff' and redis.call('HGET', P_BATCH .. b, 'first') then
    out[#out + 1] = 'BATCHFAILED'
  elseif redis.call('EXISTS', tk) == 1 then
    out[#out + 1] = 'DUP'
  elseif count >= limit then
    out[#out + 1] = 'FULL'
  else
    count = count + 1
    queued = queued + 1
    local delay = tonumber(ARGV[i + 4])
    local st = 'waiting'
    if delay > 0 then st = 'delayed' end
    redis.call('HSET', tk, 'p', ARGV[i + 1], 'st', st, 'att', 0, 'max', ARGV[i + 2], 'to', ARGV[i + 3],
      'sub', ARGV[4], 'ret', ARGV[i + 5], 'enq', t, 'due', t + delay, 'n', ARGV[i + 6], 'ten', ten)
    if ten ~= '' then redis.call('HINCRBY', K_TEN, 'n:' .. ten, 1) end
    if b ~= '' then
      redis.call('HSET', tk, 'b', b)
      if redis.call('HINCRBY', P_BATCH .. b, 'n', 1) == 1 then redis.call('HSET', P_BATCH .. b, 'pol', ARGV[i + 9]) end
      redis.call('RPUSH', P_BTASKS .. b, id)
      -- Kept while it has unfinished tasks (finish sets the expiry).
      redis.call('PERSIST', P_BATCH .. b)
      redis.call('PERSIST', P_BTASKS .. b)
    end
    if delay > 0 then
      delayed[#delayed + 1] = t + delay
      delayed[#delayed + 1] = id
    else
      if not ready[ten] then ready[ten] = {}; order[#order + 1] = ten end
      ready[ten][#ready[ten] + 1] = id
    end
    out[#out + 1] = 'OK'
  end
end
if queued > 0 then
  for _, ten in ipairs(order) do pushReady(ten, ready[ten], true) end
  bulk('ZADD', K_DELAYED, delayed)
  redis.call('INCRBY', K_COUNT, queued)
  wake()
end
return out
`)

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
var completeScript = redis.NewScript(prelude + takeFn + `
local proc = ARGV[4]
local t = now()
local ended = {} -- attempts no longer in flight
local unloads = {} -- tenant → how many of them
local function complete(id, attempt, kind, data, delay, stack)
  local tk = P_TASK .. id
  local f = redis.call('HMGET', tk, 'st', 'own', 'att', 'max', 'sub', 'ret', 'errs', 'cx', 'ten')
  if f[1] ~= 'active' or f[2] ~= proc or f[3] ~= attempt then return 'STALE', 0 end
  ended[#ended + 1] = id
  local att, ten = tonumber(f[3]), f[9] or ''
  unloads[ten] = (unloads[ten] or 0) + 1
  if kind == 'ok' then
    return 'done', finish(tk, id, 'done', t, f[5], f[6], att, nil, data, ten)
  end
  if f[8] == '1' then
    local errs = f[7]
    if kind ~= 'release' then errs = adderr(tk, f[7], att, data, t, stack) end
    return 'cancelled', finish(tk, id, 'cancelled', t, f[5], f[6], att, errs, nil, ten)
  end
  if kind == 'release' then
    redis.call('HSET', tk, 'st', 'waiting', 'own', '', 'att', att - 1)
    pushReady(ten, {id}, false)
    return 'released', 0, true
  end
  local due = t + tonumber(delay)
  if kind == 'later' then
    redis.call('HSET', tk, 'st', 'retry', 'own', '', 'att', att - 1, 'lerr', data, 'due', due)
    redis.call('ZADD', K_RETRY, due, id)
    return 'later', 0, true
  end
  local errs = adderr(tk, f[7], att, data, t, stack)
  if kind == 'fail' and att < tonumber(f[4]) then
    redis.call('HSET', tk, 'st', 'retry', 'own', '', 'due', due)
    redis.call('ZADD', K_RETRY, due, id)
    return 'retry', 0, true
  end
  return 'dead', finish(tk, id, 'dead', t, f[5], f[6], att, errs, nil, ten)
end
local out, dropped, again = {0, 0}, 0, false
for i = 7, #ARGV, 6 do
  local st, d, w = complete(ARGV[i], ARGV[i + 1], ARGV[i + 2], ARGV[i + 3], ARGV[i + 4], ARGV[i + 5])
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
  for _, v in ipairs(take(proc, KEYS[17], n, tonumber(ARGV[6]))) do out[#out + 1] = v end
end
-- A task made available again (a retry, a release) may be for another
-- process's idle workers.
if again then wake() end
return out
`)

// keepAliveScript extends a process's lease by ARGV[5] ms and stores its
// record, unless it was declared dead meanwhile. It also answers a drain
// request (drainScript): the process's request stays until the process
// says it applied it, or the server it names is gone, so a lost reply
// does not lose it.
//
//	KEYS[17] drains
//	ARGV[4] process, ARGV[5] ttl (ms), ARGV[6] record (JSON), ARGV[7]
//	the serial of the process's server ("0": none), ARGV[8] the serial
//	whose drain request it applied last ("0": none)
//
// Returns "OK", "DRAIN" (drain the server ARGV[7]) or "GONE".
var keepAliveScript = redis.NewScript(prelude + `
if not redis.call('ZSCORE', K_ALIVE, ARGV[4]) then return 'GONE' end
redis.call('ZADD', K_ALIVE, now() + tonumber(ARGV[5]), ARGV[4])
redis.call('HSET', K_PROCS, ARGV[4], ARGV[6])
local d = redis.call('HGET', KEYS[17], ARGV[4])
if d then
  if d == ARGV[7] and d ~= ARGV[8] then return 'DRAIN' end
  redis.call('HDEL', KEYS[17], ARGV[4])
end
return 'OK'
`)

// drainScript asks every live process that serves, by its record (its
// server's serial "srv"), to switch that server to drain: it stores the
// serial in drains, which the process reads on its next keep-alive, and
// publishes on the drain channel so that the processes keep alive at
// once. Requests left by processes no longer registered are dropped.
//
//	KEYS[17] drains
//
// Returns how many processes were asked, or -1 when the queue does not
// exist (nothing is written).
var drainScript = redis.NewScript(prelude + `
if redis.call('EXISTS', K_SETTINGS) == 0 then return -1 end
local old = redis.call('HGETALL', KEYS[17]) -- not HKEYS: ACLCommands lists what the scripts use
for i = 1, #old, 2 do
  if not redis.call('ZSCORE', K_ALIVE, old[i]) then redis.call('HDEL', KEYS[17], old[i]) end
end
local n = 0
for _, p in ipairs(redis.call('ZRANGEBYSCORE', K_ALIVE, now(), '+inf')) do
  local rec = redis.call('HGET', K_PROCS, p)
  local ok, r = false, nil
  if rec then ok, r = pcall(cjson.decode, rec) end
  local srv = ok and type(r) == 'table' and tonumber(r.srv) or 0
  if srv > 0 then
    redis.call('HSET', KEYS[17], p, string.format('%d', srv))
    n = n + 1
  end
end
if n > 0 then redis.call('PUBLISH', P_CHAN .. 'drain', '') end
return n
`)

// reapScript declares dead up to ARGV[4] processes whose lease ran out,
// and gives their tasks in flight back: each such attempt counts as
// failed ("stopped answering"), so a task that kills its process every
// time ends as a dead letter after its max attempts. A drain request
// of a process declared dead is kept: if the process comes back, it
// still drains (drainScript drops the requests of processes gone).
//
//	ARGV[4] limit
//
// Returns {processes declared dead, tasks requeued, tasks finished,
// dead letters dropped}.
var reapScript = redis.NewScript(prelude + `
local t = now()
local procs = redis.call('ZRANGEBYSCORE', K_ALIVE, '-inf', '(' .. t, 'LIMIT', 0, tonumber(ARGV[4]))
local requeued, finished, dropped = 0, 0, 0
for _, p in ipairs(procs) do
  local ik = P_INFLIGHT .. p
  for _, id in ipairs(redis.call('SMEMBERS', ik)) do
    local tk = P_TASK .. id
    local f = redis.call('HMGET', tk, 'st', 'own', 'att', 'max', 'sub', 'ret', 'errs', 'cx', 'ten')
    if f[1] == 'active' and f[2] == p then
      redis.call('HDEL', K_ACTIVE, id)
      local att, ten = tonumber(f[3]), f[9] or ''
      local errs = adderr(tk, f[7], att, 'process ' .. p .. ' stopped answering (died, paused or cut off) during the attempt', t)
      if f[8] == '1' then
        dropped = dropped + finish(tk, id, 'cancelled', t, f[5], f[6], att, errs, nil, ten)
        finished = finished + 1
      elseif att >= tonumber(f[4]) then
        dropped = dropped + finish(tk, id, 'dead', t, f[5], f[6], att, errs, nil, ten)
        finished = finished + 1
      else
        redis.call('HSET', tk, 'st', 'waiting', 'own', '')
        pushReady(ten, {id}, false)
        requeued = requeued + 1
      end
      unload(ten, 1)
    end
  end
  redis.call('DEL', ik)
  redis.call('ZREM', K_ALIVE, p)
  redis.call('HDEL', K_PROCS, p)
  redis.call('SREM', K_IDLE, p)
end
if #procs > 0 then releaseHolds(procs) end
flush()
if requeued > 0 then wake() end
return {#procs, requeued, finished, dropped}
`)

// deregisterScript gives back a process's tasks still marked in flight
// that it does not run: all of them once it runs none (a stopped server
// whose outcomes could not be recorded), or the ids listed (tasks whose
// dequeue reply was lost). They go back to ready at once without using
// an attempt. With ARGV[5] "1" it also removes the process (Close) and
// its drain request.
//
//	KEYS[17] the process's inflight set, KEYS[18] drains
//	ARGV[4] process, ARGV[5] "1" to remove it, ARGV[6...] ids (none: all)
//
// Returns how many tasks went back.
var deregisterScript = redis.NewScript(prelude + `
local ids = {}
for i = 6, #ARGV do ids[#ids + 1] = ARGV[i] end
local all = #ids == 0
if all then ids = redis.call('SMEMBERS', KEYS[17]) end
local back = 0
for _, id in ipairs(ids) do
  local tk = P_TASK .. id
  local f = redis.call('HMGET', tk, 'st', 'own', 'att', 'ten')
  if f[1] == 'active' and f[2] == ARGV[4] then
    local ten = f[4] or ''
    redis.call('HDEL', K_ACTIVE, id)
    redis.call('HSET', tk, 'st', 'waiting', 'own', '', 'att', tonumber(f[3]) - 1)
    pushReady(ten, {id}, false)
    unload(ten, 1)
    back = back + 1
  end
  redis.call('SREM', KEYS[17], id)
end
if ARGV[5] == '1' then
  redis.call('ZREM', K_ALIVE, ARGV[4])
  redis.call('HDEL', K_PROCS, ARGV[4])
  redis.call('SREM', K_IDLE, ARGV[4])
  redis.call('HDEL', KEYS[18], ARGV[4])
  releaseHolds({ARGV[4]})
end
if back > 0 then wake() end
return back
`)

// withdrawScript takes back a task whose Submit failed after Redis may
// have received it: it records the Submit's nonce as withdrawn (kept for
// withdrawnTTL; the withdrawn set expires withdrawnTTL after the last
// withdrawal), so that the Submit is refused if it reaches Redis later;
// a task it queued already is deleted as if never submitted (a batch left
// with no task goes with it), unless a worker took it, which is then
// cancelled (it may have run).
//
//	ARGV[4] id, ARGV[5] the Submit's nonce, ARGV[6] withdrawnTTL (ms)
//
// Returns "ABSENT" (not queued), "WITHDRAWN" or "CANCELLED".
var withdrawScript = redis.NewScript(prelude + `
local id, nonce = ARGV[4], ARGV[5]
local t = now()
redis.call('ZADD', K_WITHDRAWN, t, nonce)
redis.call('ZREMRANGEBYSCORE', K_WITHDRAWN, '-inf', t - tonumber(ARGV[6]))
-- Every nonce in it is forgotten by then.
redis.call('PEXPIRE', K_WITHDRAWN, ARGV[6])
local tk = P_TASK .. id
local f = redis.call('HMGET', tk, 'st', 'n', 'own', 'ten', 'b', 'ret')
if not f[1] or f[2] ~= nonce then return 'ABSENT' end
if f[1] == 'waiting' or f[1] == 'delayed' or f[1] == 'retry' then
  local ten = f[4] or ''
  if f[1] == 'waiting' then unready(ten, id) end
  if f[5] and f[5] ~= '' then
    -- Never part of its batch. A batch left with no task goes; one
    -- whose other tasks have all finished is kept as long as an outcome
    -- (as finish does when its last task finishes).
    local bk, bt = P_BATCH .. f[5], P_BTASKS .. f[5]
    redis.call('LREM', bt, 1, id)
    local n = redis.call('HINCRBY', bk, 'n', -1)
    if n <= 0 then
      redis.call('DEL', bk, bt)
    elseif tonumber(redis.call('HGET', bk, 'done') or '0') >= n then
      redis.call('PEXPIRE', bk, f[6] or ARGV[6])
      redis.call('PEXPIRE', bt, f[6] or ARGV[6])
    end
  end
  redis.call('ZREM', K_DELAYED, id)
  redis.call('ZREM', K_RETRY, id)
  redis.call('DEL', tk)
  uncount(1)
  if ten ~= '' then
    lower('n:' .. ten, 1)
    settle(ten)
  end
  return 'WITHDRAWN'
end
if f[1] == 'active' then
  redis.call('HSET', tk, 'cx', '1')
  redis.call('PUBLISH', P_CHAN .. 'cancel:' .. f[3], id)
end
return 'CANCELLED'
`)

// cancelScript cancels a task: one not running gets its outcome at once;
// one running is marked, and its process is told to end the handler's
// ctx (the outcome is recorded when the attempt ends; a success still
// wins).
//
//	KEYS[17] task key
//	ARGV[4] id
//
// Returns "NOTFOUND", "FINISHED", "REQUESTED" or "CANCELLED".
var cancelScript = redis.NewScript(prelude + `
local res = cancelOne(KEYS[17], ARGV[4], now())
flush()
return res
`)

// replayScript queues a dead letter again, with its attempts and errors
// reset.
//
//	KEYS[17] task key
//	ARGV[4] id
//
// Returns "OK", "NOTDEAD", "FULL" (the queue's max_queued setting) or
// "UNKNOWN" (its tenant is no longer registered).
var replayScript = redis.NewScript(prelude + `
local id = ARGV[4]
if not redis.call('ZSCORE', K_DEAD, id) then return 'NOTDEAD' end
local limit = tonumber(redis.call('HGET', K_SETTINGS, 'max_queued') or '0')
if limit > 0 and tonumber(redis.call('GET', K_COUNT) or '0') >= limit then return 'FULL' end
local ten = redis.call('HGET', KEYS[17], 'ten') or ''
if ten ~= '' and not redis.call('HGET', K_TEN, 'c:' .. ten) then return 'UNKNOWN' end
redis.call('ZREM', K_DEAD, id)
redis.call('INCR', K_COUNT)
if ten ~= '' then redis.call('HINCRBY', K_TEN, 'n:' .. ten, 1) end
redis.call('HDEL', KEYS[17], 'errs', 'fin', 'res', 'cx', 'lerr', 'b') -- a new task, out of its batch
redis.call('HSET', KEYS[17], 'st', 'waiting', 'att', 0, 'own', '', 'enq', now(), 'due', 0)
pushReady(ten, {id}, true)
wake()
return 'OK'
`)

// purgeScript deletes up to ARGV[4] of the oldest dead letters.
//
//	ARGV[4] limit
//
// Returns how many it deleted.
var purgeScript = redis.NewScript(prelude + `
local old = redis.call('ZPOPMIN', K_DEAD, tonumber(ARGV[4]))
for i = 1, #old, 2 do redis.call('DEL', P_TASK .. old[i]) end
return #old / 2
`)

// setTenantScript registers a tenant, or changes its capacity (at once:
// a lower one admits nothing more until its load is below it, a higher
// one lets its waiting tasks in).
//
//	ARGV[4] tenant, ARGV[5] capacity
var setTenantScript = redis.NewScript(prelude + `
local ten = ARGV[4]
redis.call('HSET', K_TEN, 'c:' .. ten, ARGV[5])
redis.call('HDEL', K_TEN, 'g:' .. ten)
if redis.call('SREM', K_PARKED, ten) == 1 then redis.call('RPUSH', K_TURNS, ten) end
if redis.call('LLEN', readyKey(ten)) > 0 then wake() end
return 'OK'
`)

// removeTenantScript takes a tenant off the allow-list: Submit, Replay
// and Acquire refuse it from now on; its unfinished tasks still run,
// within its last capacity, and it is forgotten when the last finishes.
//
//	ARGV[4] tenant
//
// Returns "OK" or "NOTFOUND".
var removeTenantScript = redis.NewScript(prelude + `
local ten = ARGV[4]
local c = redis.call('HGET', K_TEN, 'c:' .. ten)
if not c then return 'NOTFOUND' end
redis.call('HDEL', K_TEN, 'c:' .. ten)
redis.call('HSET', K_TEN, 'g:' .. ten, c)
settle(ten)
return 'OK'
`)

// acquireScript takes one slot of a tenant's capacity for the live
// process ARGV[4], held under the token ARGV[6] until released or the
// process is declared dead.
//
//	ARGV[4] process, ARGV[5] tenant, ARGV[6] token
//
// Returns "OK", "BUSY" (at capacity), "UNKNOWN", "GONE" or "LATE" (the
// process is not registered, or its lease ran out).
var acquireScript = redis.NewScript(prelude + `
local proc, ten = ARGV[4], ARGV[5]
local exp = redis.call('ZSCORE', K_ALIVE, proc)
if not exp then return 'GONE' end
if tonumber(exp) < now() then return 'LATE' end
local c = redis.call('HGET', K_TEN, 'c:' .. ten)
if not c then return 'UNKNOWN' end
if tonumber(redis.call('HGET', K_TEN, 'l:' .. ten) or '0') >= tonumber(c) then return 'BUSY' end
redis.call('HINCRBY', K_TEN, 'l:' .. ten, 1)
redis.call('HSET', K_HOLDS, ARGV[6], proc .. '\n' .. ten)
return 'OK'
`)

// releaseScript gives back the slot held under the token ARGV[4].
//
// Returns "OK", or "GONE" (released already, or its process was declared
// dead and its slots given back).
var releaseScript = redis.NewScript(prelude + `
local v = redis.call('HGET', K_HOLDS, ARGV[4])
if not v then return 'GONE' end
redis.call('HDEL', K_HOLDS, ARGV[4])
local _, ten = string.match(v, '^([^\n]*)\n(.*)$')
unload(ten, 1)
return 'OK'
`)

// setUntenantedScript sets the untenanted tasks' capacity (ARGV[4], or
// "" for none).
var setUntenantedScript = redis.NewScript(prelude + `
if ARGV[4] == '' then
  redis.call('HDEL', K_TEN, 'u')
else
  redis.call('HSET', K_TEN, 'u', ARGV[4])
end
if redis.call('SREM', K_PARKED, '') == 1 then redis.call('RPUSH', K_TURNS, '') end
if redis.call('LLEN', K_READY) > 0 then wake() end
return 'OK'
`)
