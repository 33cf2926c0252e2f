package queue

import (
	"strconv"

	"github.com/shepherd-go/shepherd/internal/member"
)

// prelude is prepended to every script, after the membership helpers
// (member.LuaClock and LuaLedger: now_ms, lapsed, withdraw_call,
// was_withdrawn; scripts that need more add it): it names
// the common keys and prefixes (see wire.go), binds the task hash's fields
// to their Lua locals (fieldLocals), and defines the functions the scripts
// share.
var prelude = member.LuaClock + member.LuaLedger + `
local K_SETTINGS, K_READY, K_DELAYED, K_RETRY, K_ACTIVE = KEYS[1], KEYS[2], KEYS[3], KEYS[4], KEYS[5]
local K_DEAD, K_COUNT, K_DROPPED, K_ALIVE, K_PROCS = KEYS[6], KEYS[7], KEYS[8], KEYS[9], KEYS[10]
local K_WITHDRAWN, K_IDLE = KEYS[11], KEYS[12]
local K_TEN, K_TURNS, K_PARKED, K_HOLDS = KEYS[13], KEYS[14], KEYS[15], KEYS[16]
local P_TASK, P_INFLIGHT, P_CHAN = ARGV[1], ARGV[2], ARGV[3]
local PUBLISH = 'PUBLISH' -- the channel prefix marked "!": SPUBLISH (layout.pubChannel)
if string.byte(P_CHAN, 1) == 33 then PUBLISH, P_CHAN = 'SPUBLISH', string.sub(P_CHAN, 2) end
local P_BATCH = string.sub(P_TASK, 1, -6) .. 'batch:' -- beside task:, see layout.go
local P_BTASKS = string.sub(P_TASK, 1, -6) .. 'btasks:'
local K_RATED = string.sub(P_TASK, 1, -6) .. 'rated'
local P_TASKS = string.sub(P_TASK, 1, -6) .. 'tasks:'
-- A tenant's delayed and retrying tasks, by due time: P_TDELAYED ..
-- tenant ('' for none) holds those of K_DELAYED, P_TRETRY .. tenant
-- those of K_RETRY (layout.tenantDelayed; Client.TenantTasks).
local P_TDELAYED = string.sub(P_TASK, 1, -6) .. 'tdelayed:'
local P_TRETRY = string.sub(P_TASK, 1, -6) .. 'tretry:'
` + fieldLocals() + inlineFields(preludeFns)

var hashReadCall, hashReadNames = hashRead()

// preludeFns are the prelude's functions (inlineFields: as written, they
// name the task's fields by their locals).
var preludeFns = luaLease + luaRecords + luaReady

// luaLease defines MAX_PRIORITY, now and leaseOf, which tells whether a
// process's lease runs.
var luaLease = `
local MAX_PRIORITY = ` + strconv.Itoa(MaxPriority) + `
local now = now_ms

-- leaseOf tells whether process proc's lease runs at t (nil), or why
-- not: 'GONE' (it has no keep-alive: declared dead, or never
-- registered) or 'LATE' (its keep-alive is older than the queue's TTL:
-- about to be declared dead). ttl is the queue's TTL setting when the
-- caller read it already (false: absent), nil to read it here.
local function leaseOf(proc, t, ttl)
  local at = redis.call('HGET', K_ALIVE, proc)
  if ttl == nil then ttl = redis.call('HGET', K_SETTINGS, '` + settingTTL + `') end
  if not at or not ttl then return 'GONE' end -- no TTL: the queue's state is gone
  if lapsed(at, t, ttl) then return 'LATE' end
  return nil
end
`

// luaReady holds the helpers of the waiting lists and the counters:
// wake, bulk, lower, uncount, readyKey, above0, hasWaiting, pushReady,
// readyAgain and unready.
const luaReady = `
-- wake tells the processes left with idle workers by their last take
-- that tasks may be available.
local woke = false
local function wake()
  if woke then return end
  woke = true
  if redis.call('EXISTS', K_IDLE) == 1 then redis.call(PUBLISH, P_CHAN .. 'wake', '') end
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

-- readyKey is the list of a tenant's waiting tasks of priority pri (nil
-- or 0: the default): ready, ready:TENANT, ready/PRI, ready/PRI:TENANT.
local function readyKey(ten, pri)
  local k = K_READY
  if pri and pri > 0 then k = K_READY .. '/' .. pri end
  if ten == '' then return k end
  return k .. ':' .. ten
end

-- above0 is how many of a tenant's waiting tasks have a priority above 0
-- (the field "q:TENANT" of the tenants hash counts them, while there
-- are some).
local function above0(ten)
  return tonumber(redis.call('HGET', K_TEN, 'q:' .. ten) or '0')
end

-- hasWaiting tells whether a tenant has waiting tasks, at any priority.
local function hasWaiting(ten)
  return redis.call('LLEN', readyKey(ten)) > 0 or above0(ten) > 0
end

-- pushReady puts ids of one priority (nil: 0) in a tenant's waiting
-- lists, on the left (taken last, in order) or on the right (taken
-- first, the last id first), and gives the tenant a turn if it had no
-- waiting task.
local function pushReady(ten, ids, left, pri)
  if #ids == 0 then return end
  local cmd = 'RPUSH'
  if left then cmd = 'LPUSH' end
  local len = 0
  for i = 1, #ids, 1000 do
    len = redis.call(cmd, readyKey(ten, pri), unpack(ids, i, math.min(i + 999, #ids)))
  end
  -- Whether the tenant had waiting tasks before: in this list, then
  -- in the others.
  local before = len > #ids
  if pri and pri > 0 then
    before = redis.call('HINCRBY', K_TEN, 'q:' .. ten, #ids) > #ids or before or redis.call('LLEN', readyKey(ten)) > 0
  elseif not before then
    before = above0(ten) > 0
  end
  if not before then redis.call('RPUSH', K_TURNS, ten) end
end

-- readyAgain makes the task id waiting again, first in line within its
-- priority.
local function readyAgain(ten, id)
  local r = rec(id)
  if r and r[F_STATE] ~= 'waiting' then recSet(id, F_STATE, 'waiting') end
  pushReady(ten, {id}, false, tonumber(r and r[F_PRIORITY] or '0'))
end

-- unready removes a waiting task of priority pri from its tenant's list;
-- a tenant left with none loses its turn.
local function unready(ten, id, pri)
  if redis.call('LREM', readyKey(ten, pri), 1, id) > 0 and pri and pri > 0 then
    lower('q:' .. ten, 1)
  end
  if not hasWaiting(ten) then
    redis.call('LREM', K_TURNS, 0, ten)
    redis.call('SREM', K_PARKED, ten)
    redis.call('ZREM', K_RATED, ten)
  end
end
`
