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
` + fieldLocals() + inlineFields(preludeFns)

var hashReadCall, hashReadNames = hashRead()

// preludeFns are the prelude's functions (inlineFields: as written, they
// name the task's fields by their locals).
var preludeFns = `
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

-- Unfinished tasks live in the shard's tasks hashes, each a record: its
-- fields (wire.go) but the payload packed as one msgpack map of strings,
-- then the payload's bytes (wire.go, "Records"). A script reads a record
-- once (rec, recLoad: its fields, and the payload only when asked,
-- recPayload), changes it (recSet) and writes what it changed in one go
-- before it returns (recSave). A task with a payload over
-- recordMaxPayload, or one an earlier version queued, has a hash of its
-- own instead: rec reads its fields from there (recOwn), and recSet
-- writes them there at once.
local recs, recOwn, recDirty, recGone = {}, {}, {}, {}
-- recRaw: a record as read, and where its payload starts; recP: the
-- payloads taken out of them, or read from a task's own hash.
local recRaw, recAt, recP = {}, {}, {}

-- recKey is the key of the tasks hash that holds task id's record: the
-- id's last two characters name it (layout.tasksOf).
local function recKey(id)
  return P_TASKS .. string.sub(id, -2)
end

-- byKey groups the list (ids, or id and value pairs when step is 2) by
-- the tasks hash of each id, and runs cmd on each hash with its part, in
-- chunks (unpack has a limit); fn, if any, gets each chunk's reply, the
-- part and the index in it of the chunk's first item.
local function byKey(cmd, list, step, fn)
  local parts, order = {}, {}
  for i = 1, #list, step do
    local x = string.sub(list[i], -2)
    local p = parts[x]
    if not p then p = {}; parts[x] = p; order[#order + 1] = x end
    for j = 0, step - 1 do p[#p + 1] = list[i + j] end
  end
  for _, x in ipairs(order) do
    local p, k = parts[x], P_TASKS .. x
    for i = 1, #p, 1000 do
      local r = redis.call(cmd, k, unpack(p, i, math.min(i + 999, #p)))
      if fn then fn(r, p, i) end
    end
  end
end

-- recHash reads task id's own hash (a task with a large payload, or an
-- earlier version's): its fields but the payload as a record, or false
-- when it has none or is finished (an outcome or a dead letter).
local HASH_FIELDS = ` + hashReadNames + `
local function recHash(id)
  local tk = P_TASK .. id
  local v = ` + hashReadCall + `
  local st = v[1]
  if not st or st == 'done' or st == 'dead' or st == 'cancelled' then return false end
  local r = {}
  for i, k in ipairs(HASH_FIELDS) do
    if v[i] then r[k] = v[i] end
  end
  recOwn[id] = true
  return r
end

-- recTake reads, of task id's own hash, the fields take needs and the
-- payload, in one command (recHash reads them all but the payload):
-- those fields as a record, or false as recHash.
local function recTake(id)
  local tk = P_TASK .. id
  local v = redis.call('HMGET', tk, F_STATE, F_PAYLOAD, F_ATTEMPTS, F_MAX_ATTEMPTS, F_TIMEOUT, F_SUBMITTED, F_DUE, F_TRACE, F_SUBMITTER, F_RETENTION, F_BATCH)
  if v[1] ~= 'waiting' then return false end
  recOwn[id], recP[id] = true, v[2] or nil
  return {st = v[1], att = v[3] or nil, max = v[4] or nil, to = v[5] or nil, enq = v[6] or nil, due = v[7] or nil,
    tc = v[8] or nil, sub = v[9] or nil, ret = v[10] or nil, b = v[11] or nil}
end

-- recLoad reads the records of the tasks ids not read yet: one HMGET for
-- them all. A task with no record has a hash of its own: how reads it
-- ('take': recTake; 'later': not now, recHashed tells it has one; nil:
-- recHash).
local recHashed = {}
local function recLoad(ids, how)
  local want = {}
  for _, id in ipairs(ids) do
    if recs[id] == nil then want[#want + 1] = id end
  end
  byKey('HMGET', want, 1, function(v, part, first)
    for k = 1, #v do
      local id, s = part[first + k - 1], v[k]
      if s then
        local at, r = cmsgpack.unpack_one(s)
        recs[id], recRaw[id], recAt[id] = r, s, at
      elseif how == 'take' then
        recs[id] = recTake(id)
      elseif how == 'later' then
        recHashed[id] = true
      else
        recs[id] = recHash(id)
      end
    end
  end)
end

-- rec is the record of the unfinished task id (a table of its fields
-- but the payload, all strings), or false when no unfinished task has
-- that id.
local function rec(id)
  if recs[id] == nil then
    if recHashed[id] then recs[id] = recHash(id) else recLoad({id}) end
  end
  return recs[id]
end

-- recPayload is the payload of the unfinished task id, nil when it has
-- none (rec is false, or the record was made by recSet alone).
local function recPayload(id)
  local p = recP[id]
  if p == nil and recRaw[id] then
    -- (unpack_one gives -1 for a record read whole: an empty payload.)
    p = recAt[id] < 0 and '' or string.sub(recRaw[id], recAt[id] + 1)
    recP[id] = p
  elseif p == nil and recOwn[id] then
    local tk = P_TASK .. id
    p = redis.call('HGET', tk, F_PAYLOAD)
    recP[id] = p
  end
  return p or nil
end

-- recSet sets fields of task id's record: field, value, field,
-- value... (a value a string, or an integer; nil deletes the field);
-- recSave writes them (a task's own hash: written at once).
local function recSet(id, ...)
  local r, a = rec(id), {...}
  if not r then r = {}; recs[id] = r end -- as HSET makes a hash
  local tk = recOwn[id] and P_TASK .. id
  for i = 1, select('#', ...), 2 do
    local v = a[i + 1]
    if type(v) == 'number' then v = string.format('%d', v) end
    r[a[i]] = v
    -- A task's own hash is written at once.
    if tk and v == nil then
      redis.call('HDEL', tk, a[i])
    elseif tk then
      redis.call('HSET', tk, a[i], v)
    end
  end
  if not tk and not recDirty[id] then recDirty[id] = true; recDirty[#recDirty + 1] = id end
end

-- recNew records a new task id: its fields r but the payload (strings),
-- and its payload p.
local function recNew(id, r, p)
  recs[id], recP[id] = r, p
  if not recDirty[id] then recDirty[id] = true; recDirty[#recDirty + 1] = id end
end

-- recDrop forgets task id's record: it finished (its outcome is its own
-- hash) or went. A task's own hash (recOwn) is left to the caller.
local function recDrop(id)
  if recs[id] and not recOwn[id] then recGone[#recGone + 1] = id end
  recs[id] = false
end

-- recSave writes the records changed since it last ran and deletes
-- those dropped. A record without a payload (recSet of a task gone) is
-- not a task: it is not written.
local function recSave()
  local put = {}
  for _, id in ipairs(recDirty) do
    local r, p = recs[id], recPayload(id)
    if r and p then
      put[#put + 1] = id
      put[#put + 1] = cmsgpack.pack(r) .. p
    end
    recDirty[id] = nil
  end
  recDirty = {}
  byKey('HSET', put, 2)
  byKey('HDEL', recGone, 1)
  recGone = {}
end

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

// inFlightFn reads a running attempt: finishFn has it, and so does
// progressScript.
var inFlightFn = inlineFields(inFlightLua)

// inFlightLua is inFlightFn as written (inlineFields).
const inFlightLua = `
-- inFlight reads the running attempt of task id from active (v: its
-- value when the caller read it, false for none; nil to read it here):
-- its process, attempt, start (ms), submitter, retention ('' for the
-- default), batch and tenant ('' for none), all strings; nil when the
-- task is not running. A take keeps them there alone, joined by
-- newlines, the tenant last (wire.go, "Running attempts"). A task taken
-- by an earlier version has only its process there and the rest in its
-- record (or its hash), with state 'active': read from there, with start
-- false.
local function inFlight(id, v)
  if v == nil then v = redis.call('HGET', K_ACTIVE, id) end
  if not v then return nil end
  local p, a, bg, sub, ret, b, ten = string.match(v, '^([^\n]*)\n([^\n]*)\n([^\n]*)\n([^\n]*)\n([^\n]*)\n([^\n]*)\n(.*)$')
  if p then return p, a, bg, sub, ret, b, ten end
  local r = rec(id)
  if not r or r[F_STATE] ~= 'active' or r[F_OWNER] ~= v then return nil end
  return v, r[F_ATTEMPTS] or '0', false, r[F_SUBMITTER] or '', r[F_RETENTION] or '', r[F_BATCH] or '', r[F_TENANT] or ''
end
`

// finishFn records outcomes (finish, flush) and cancels (cancelOne), and
// gives capacity back (unload, releaseHolds): the scripts that end tasks
// add it after the prelude. The others leave it out: every function a
// script defines is made anew on each call, and a script pays for all of
// them (docs/ARCHITECTURE.md, section 4, "What a call costs").
var finishFn = inlineFields(finishLua)

// finishLua is finishFn as written (inlineFields).
var finishLua = inFlightLua + `
-- adderr appends an attempt's error, and the stack of its panic if any,
-- to the task's list and returns it. A task keeps its latest panic's
-- stack only (a few KiB at most), not one per attempt.
local function adderr(id, att, msg, t, stack)
  local errs = (rec(id) or {})[F_ERRORS]
  local list = {}
  if errs and errs ~= '' then list = cjson.decode(errs) end
  local e = {a = att, e = msg, t = t}
  if stack and stack ~= '' then
    for _, old in ipairs(list) do old.s = nil end
    e.s = stack
  end
  list[#list + 1] = e
  local s = cjson.encode(list)
  recSet(id, F_ERRORS, s)
  return s
end

-- settle forgets a removed tenant once nothing of it is left.
local function settle(ten)
  if ten == '' or not redis.call('HGET', K_TEN, 'g:' .. ten) then return end
  local f = redis.call('HMGET', K_TEN, 'l:' .. ten, 'n:' .. ten)
  if tonumber(f[1] or '0') <= 0 and tonumber(f[2] or '0') <= 0 then
    redis.call('HDEL', K_TEN, 'g:' .. ten, 'l:' .. ten, 'n:' .. ten, 'p:' .. ten, 'r:' .. ten, 'rt:' .. ten)
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
-- finish records a final outcome (done, dead or cancelled): the task's
-- record leaves tasks, and its fields go into a hash of its own (tk)
-- with the outcome's. A dead letter
-- is kept (with its payload, for replay) in the dead set (fileDead, in
-- dead.go); other outcomes expire after the task's retention (ret, nil
-- or '' for the default). The submitting process is told by flush, which
-- every script that calls finish runs before it returns. b is the task's
-- batch field when the caller read it (false or '': none), nil to read it
-- here. began is what inFlight gave for the attempt that ended: a string
-- (its start) when the attempt lived in active, and its number att goes
-- into the hash; false when an earlier version took the task, whose
-- owner is cleared; nil when no attempt ended (a cancel of a task not
-- running). Returns how many dead letters were dropped.
local notes, nfinished, listed, listedFor = {}, 0, {}, 0
-- lengths: each length as a string, formatted once a call (a number
-- joined to a string is formatted each time).
local lengths = {}
local function lenOf(s)
  local n = #s
  local l = lengths[n]
  if not l then l = tostring(n); lengths[n] = l end
  return l
end
local cancelRest, fin_t, fin_ts
local function finish(tk, id, st, t, sub, ret, att, errs, res, ten, b, began)
  if not ret or ret == '' then ret = '` + defaultRetentionField + `' end
  if ten and ten ~= '' then
    lower('n:' .. ten, 1)
    settle(ten)
  end
  if b == nil then b = (rec(id) or {})[F_BATCH] end
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
  if fin_t ~= t then fin_t, fin_ts = t, tostring(t) end
  local f = {'HSET', tk, F_STATE, st, F_FINISHED, fin_ts}
  local r, old
  if recs[id] == nil and recHashed[id] then
    old = true -- a task's own hash, not read: it has its fields
  else
    r, old = rec(id), recOwn[id]
  end
  if r and not old then
    -- Its fields but its state (a task's own hash has them already); an
    -- outcome kept for its retention needs neither its payload nor its
    -- submitter (told below). A dead letter keeps both, for Replay.
    for k, v in pairs(r) do
      if k ~= F_STATE and (st == 'dead' or k ~= F_SUBMITTER) then
        f[#f + 1] = k; f[#f + 1] = v
      end
    end
    if st == 'dead' then
      f[#f + 1] = F_PAYLOAD; f[#f + 1] = recPayload(id) or ''
    end
  end
  recDrop(id)
  if began then
    f[#f + 1] = F_ATTEMPTS; f[#f + 1] = att -- kept in active while it ran
  elseif began == false then
    f[#f + 1] = F_OWNER; f[#f + 1] = '' -- taken by an earlier version (inFlight)
  end
  if res and res ~= '' then f[#f + 1] = F_RESULT; f[#f + 1] = res end
  redis.call(unpack(f))
  -- A task's own hash drops them there.
  if old and st ~= 'dead' then redis.call('HDEL', tk, F_PAYLOAD, F_SUBMITTER) end
  nfinished = nfinished + 1
  local dropped = 0
  if st == 'dead' then
    dropped = fileDead(id, t)
  else
    redis.call('PEXPIRE', tk, ret)
    listed[#listed + 1] = id
    listedFor = math.max(listedFor, tonumber(ret))
  end
  errs, res = errs or '', res or ''
  local n = notes[sub]
  if not n then n = {}; notes[sub] = n end
  n[#n + 1] = lenOf(id) .. '\n' .. st .. '\n' .. att .. '\n' .. lenOf(errs) .. '\n' .. lenOf(res) .. '\n' .. id .. errs .. res
  return dropped
end

-- cancelOne cancels the task id: one not running gets its outcome at
-- once; one running is marked, and its process told to end the
-- handler's ctx (the outcome is recorded when the attempt ends; a
-- success still wins). Returns "NOTFOUND", "FINISHED", "REQUESTED" or
-- "CANCELLED".
local function cancelOne(tk, id, t)
  local r = rec(id)
  if not r then
    if redis.call('EXISTS', tk) == 1 then return 'FINISHED' end
    return 'NOTFOUND'
  end
  local st = r[F_STATE]
  if st == 'waiting' or st == 'active' then
    local p = inFlight(id)
    if p then
      recSet(id, F_CANCEL, '1')
      redis.call(PUBLISH, P_CHAN .. 'cancel:' .. p, id)
      return 'REQUESTED'
    end
  end
  local ten = r[F_TENANT] or ''
  if st == 'waiting' then
    unready(ten, id, tonumber(r[F_PRIORITY] or '0'))
  elseif st == 'delayed' then
    redis.call('ZREM', K_DELAYED, id)
  else
    redis.call('ZREM', K_RETRY, id)
  end
  finish(tk, id, 'cancelled', t, r[F_SUBMITTER], r[F_RETENTION], r[F_ATTEMPTS] or '0', r[F_ERRORS], nil, ten, r[F_BATCH])
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
  recSave()
  if nfinished > 0 then uncount(nfinished) end
  if #listed > 0 then
    -- The latest finished tasks, newest first, for Tasks: one push a
    -- call; trimmed to the most listed once 1,000 over it, and its expiry
    -- (the longest retention of the call's outcomes) set when it is new
    -- and every 1,000 pushes, so that it goes with its outcomes.
    local key, most, len = string.sub(P_TASK, 1, -6) .. 'finished', ` + strconv.Itoa(maxFinishedListed) + `, 0
    for i = 1, #listed, 1000 do
      len = redis.call('LPUSH', key, unpack(listed, i, math.min(i + 999, #listed)))
    end
    if len > most + 1000 then redis.call('LTRIM', key, 0, most - 1) end
    if len == #listed or len % 1000 < #listed then redis.call('PEXPIRE', key, listedFor) end
  end
  for sub, n in pairs(notes) do
    redis.call(PUBLISH, P_CHAN .. 'done:' .. sub, table.concat(n))
  end
end
`
