package queue

// submitFn queues tasks one at a time (queueTask) and then, in one go,
// pushes the waiting ones, adds the delayed ones and counts them
// (queued). submitScript runs it for a batch of Submits, the scheduler's
// tick script for the ticks of its schedules.
const submitFn = `
local P_DEDUP = string.sub(P_TASK, 1, -6) .. 'dedup:'
local q_ready, q_order, q_delayed, q_queued = {}, {}, {}, 0
local q_tdelayed = {} -- tenant → due, id, ...: its part of q_delayed
local q_count, q_withdrawn, q_t, q_ts

-- queueTask queues the task id submitted by process sub at t, or says why
-- not: "WITHDRAWN" (its Submit failed and withdrew it before it got
-- here), "UNKNOWN" (its tenant is not registered), "BATCHFAILED" (its
-- fail-fast batch failed already), "DUP" (the id is known), "DEDUP:ID"
-- (its deduplication key is held by task ID) or "FULL" (limit: max
-- unfinished tasks, 0 for none). A refused task writes nothing. tc, the
-- Submit's span context, may be nil or "" (not traced).
local function queueTask(t, sub, limit, id, payload, maxAtt, timeout, delay, ret, nonce, ten, b, pol, pri, dkey, dwin, tc)
  if not q_count then
    q_count = tonumber(redis.call('GET', K_COUNT) or '0')
    q_withdrawn = redis.call('EXISTS', K_WITHDRAWN) == 1
  end
  local tk = P_TASK .. id
  if q_withdrawn and was_withdrawn(K_WITHDRAWN, nonce) then return 'WITHDRAWN' end
  if ten ~= '' and not redis.call('HGET', K_TEN, 'c:' .. ten) then return 'UNKNOWN' end
  if b ~= '' and pol == 'ff' and redis.call('HGET', P_BATCH .. b, 'first') then return 'BATCHFAILED' end
  -- A random id (70 random bits, made by Submit: its nonce is the id) is not
  -- looked up: only a caller's id (WithTaskID) or a tick's can be known.
  if nonce ~= id and (recs[id] or redis.call('HEXISTS', recKey(id), id) == 1 or redis.call('EXISTS', tk) == 1) then return 'DUP' end
  if dkey ~= '' then
    local first = redis.call('GET', P_DEDUP .. dkey)
    if first then return 'DEDUP:' .. first end
  end
  if limit > 0 and q_count >= limit then return 'FULL' end
  q_count = q_count + 1
  q_queued = q_queued + 1
  local st = 'waiting'
  if delay > 0 then st = 'delayed' end
  -- Fields equal to their readers' default are left out (wire.go).
  if q_t ~= t then q_t, q_ts = t, tostring(t) end
  local r = {}
  r['st'], r['sub'], r['enq'] = st, sub, q_ts
  if maxAtt ~= '` + defaultMaxField + `' then r['max'] = maxAtt end
  if timeout ~= '` + defaultTimeoutField + `' then r['to'] = timeout end
  if ret ~= '` + defaultRetentionField + `' then r['ret'] = ret end
  if delay > 0 then r['due'] = string.format('%d', t + delay) end
  if nonce ~= id then r['n'] = nonce end
  if ten ~= '' then r['ten'] = ten end
  if pri > 0 then r['pri'] = tostring(pri) end
  if tc and tc ~= '' then r['tc'] = tc end
  if dkey ~= '' then
    redis.call('SET', P_DEDUP .. dkey, id, 'PX', dwin)
    r['dk'] = dkey
  end
  if b ~= '' then r['b'] = b end
  if #payload > ` + recordMaxPayloadText + ` then
    -- A large payload: the task is a hash of its own (wire.go, "Records").
    local f = {'HSET', tk, 'p', payload}
    for k, v in pairs(r) do f[#f + 1] = k; f[#f + 1] = v end
    redis.call(unpack(f))
  else
    recNew(id, r, payload)
  end
  if ten ~= '' then redis.call('HINCRBY', K_TEN, 'n:' .. ten, 1) end
  if b ~= '' then
    if redis.call('HINCRBY', P_BATCH .. b, 'n', 1) == 1 then redis.call('HSET', P_BATCH .. b, 'pol', pol) end
    redis.call('RPUSH', P_BTASKS .. b, id)
    -- Kept while it has unfinished tasks (finish sets the expiry).
    redis.call('PERSIST', P_BATCH .. b)
    redis.call('PERSIST', P_BTASKS .. b)
  end
  if delay > 0 then
    q_delayed[#q_delayed + 1] = t + delay
    q_delayed[#q_delayed + 1] = id
    local td = q_tdelayed[ten]
    if not td then td = {}; q_tdelayed[ten] = td end
    td[#td + 1] = t + delay
    td[#td + 1] = id
  else
    local g = ten .. '\n' .. pri
    if not q_ready[g] then q_ready[g] = {}; q_order[#q_order + 1] = {ten, pri, g} end
    q_ready[g][#q_ready[g] + 1] = id
  end
  return 'OK'
end

-- queued pushes what queueTask queued, and wakes the idle workers.
local function queued()
  if q_queued == 0 then return end
  recSave()
  for _, o in ipairs(q_order) do pushReady(o[1], q_ready[o[3]], true, o[2]) end
  bulk('ZADD', K_DELAYED, q_delayed)
  for ten, td in pairs(q_tdelayed) do bulk('ZADD', P_TDELAYED .. ten, td) end
  redis.call('INCRBY', K_COUNT, q_queued)
  wake()
end
`
