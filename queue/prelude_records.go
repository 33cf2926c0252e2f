package queue

// luaRecords is the part of the prelude (preludeFns) that reads and
// writes unfinished tasks' records: rec, recLoad, recPayload, recSet,
// recNew, recDrop, recSave and the helpers they share.
var luaRecords = `
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
`
