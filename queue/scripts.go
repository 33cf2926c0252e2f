package queue

import "github.com/redis/go-redis/v9"

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
