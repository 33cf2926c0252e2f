package queue

import "strconv"

// The Lua that scripts ending tasks add after the prelude: inFlight
// (inFlightFn, which progressScript adds alone), and finish, flush,
// cancelOne and the capacity give-backs (finishFn).

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
    redis.call('ZREM', P_TDELAYED .. ten, id)
  else
    redis.call('ZREM', K_RETRY, id)
    redis.call('ZREM', P_TRETRY .. ten, id)
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
