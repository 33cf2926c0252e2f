package rmap

import "github.com/redis/go-redis/v9"

// scriptT is the type of the scripts below.
type scriptT = *redis.Script

// Every write script takes
//
//	KEYS[1] the map's hash, KEYS[2] its revision hash (fields "epoch" and
//	RevField), KEYS[3] its pub/sub channel;
//	ARGV[1] a fresh random epoch, used only if KEYS[2] does not exist (a new
//	map, or one Redis lost), ARGV[2] the maximum value size in bytes;
//
// followed by its own ARGV[3...], and returns the reply
//
//	{epoch, rev, status, prev, new, count}
//
// epoch and rev are the map's revision after the script (unchanged when
// nothing was written). status is statusNone (nothing written: a condition
// failed or there was nothing to do), statusSet (the key now holds new),
// statusDeleted, statusCleared, or one of the negative error statuses, in
// which case nothing was written. prev is the key's value before the
// script, or nil when it had none (for statusNotInteger, Redis's error
// text). count is what the operation counts (list length, values added or
// removed, entries cleared).
//
// A script that writes bumps the revision and publishes on KEYS[3], in the
// same atomic step, the message "EPOCH REV BODY" where BODY is
//
//	S<len(key)> <key><value>   the key now holds value
//	D<len(key)> <key>          the key was deleted
//	C                          the map was cleared
//	X                          the map was destroyed (both keys deleted)
//
// Lengths are byte counts in decimal, so any key and value bytes are
// unambiguous.
var prelude = `
local REV = "` + RevField + `"
local function state()
  local st = redis.call("HMGET", KEYS[2], "epoch", REV)
  return st[1] or "", st[2] or "0"
end
local function nochange(status, prev, count)
  local e, r = state()
  return {e, r, status, prev, false, count or 0}
end
local function commit(body)
  local epoch = redis.call("HGET", KEYS[2], "epoch")
  if not epoch then
    epoch = ARGV[1]
    redis.call("HSET", KEYS[2], "epoch", epoch)
  end
  local rev = redis.call("HINCRBY", KEYS[2], REV, 1)
  redis.call("PUBLISH", KEYS[3], epoch .. " " .. rev .. " " .. body)
  return epoch, rev
end
local function put(k, v)
  redis.call("HSET", KEYS[1], k, v)
  return commit("S" .. #k .. " " .. k .. v)
end
local function del(k)
  redis.call("HDEL", KEYS[1], k)
  return commit("D" .. #k .. " " .. k)
end
-- decode parses a list value ("<len>:<bytes>" repeated) or returns nil.
local function decode(s)
  local t, i, n = {}, 1, #s
  while i <= n do
    local c = string.find(s, ":", i, true)
    if not c then return nil end
    local ls = string.sub(s, i, c - 1)
    if not string.match(ls, "^%d+$") then return nil end
    local l = tonumber(ls)
    if c + l > n then return nil end
    t[#t + 1] = string.sub(s, c + 1, c + l)
    i = c + l + 1
  end
  return t
end
local function encode(t)
  local b = {}
  for _, v in ipairs(t) do b[#b + 1] = #v .. ":" .. v end
  return table.concat(b)
end
`

// Reply statuses of the write scripts.
const (
	statusNotInteger = -1
	statusNotList    = -2
	statusTooLarge   = -3
	statusNone       = 0
	statusSet        = 1
	statusDeleted    = 2
	statusCleared    = 3
)

// setScript sets a key. ARGV[3] key, ARGV[4] value.
var setScript = redis.NewScript(prelude + `
local prev = redis.call("HGET", KEYS[1], ARGV[3])
local e, r = put(ARGV[3], ARGV[4])
return {e, r, 1, prev, ARGV[4], 0}
`)

// setNXScript sets a key that does not exist. ARGV[3] key, ARGV[4] value.
// On statusNone, prev is the value that prevented the write.
var setNXScript = redis.NewScript(prelude + `
local prev = redis.call("HGET", KEYS[1], ARGV[3])
if prev then return nochange(0, prev) end
local e, r = put(ARGV[3], ARGV[4])
return {e, r, 1, false, ARGV[4], 0}
`)

// setXXScript sets a key that exists. ARGV[3] key, ARGV[4] value.
// statusNone when it does not exist.
var setXXScript = redis.NewScript(prelude + `
local prev = redis.call("HGET", KEYS[1], ARGV[3])
if not prev then return nochange(0, false) end
local e, r = put(ARGV[3], ARGV[4])
return {e, r, 1, prev, ARGV[4], 0}
`)

// testAndSetScript sets a key that holds an expected value. ARGV[3] key,
// ARGV[4] expected value, ARGV[5] new value. On statusNone, prev is the
// value found (nil when the key does not exist).
var testAndSetScript = redis.NewScript(prelude + `
local prev = redis.call("HGET", KEYS[1], ARGV[3])
if prev ~= ARGV[4] then return nochange(0, prev) end
local e, r = put(ARGV[3], ARGV[5])
return {e, r, 1, prev, ARGV[5], 0}
`)

// deleteScript deletes a key. ARGV[3] key. statusNone when it did not
// exist.
var deleteScript = redis.NewScript(prelude + `
local prev = redis.call("HGET", KEYS[1], ARGV[3])
if not prev then return nochange(0, false) end
local e, r = del(ARGV[3])
return {e, r, 2, prev, false, 0}
`)

// testAndDeleteScript deletes a key that holds an expected value. ARGV[3]
// key, ARGV[4] expected value. On statusNone, prev is the value found.
var testAndDeleteScript = redis.NewScript(prelude + `
local prev = redis.call("HGET", KEYS[1], ARGV[3])
if prev ~= ARGV[4] then return nochange(0, prev) end
local e, r = del(ARGV[3])
return {e, r, 2, prev, false, 0}
`)

// incScript adds to an integer entry (a missing one counts as 0) with
// HINCRBY's 64-bit arithmetic. ARGV[3] key, ARGV[4] delta. new is the
// result as Redis stores it; statusNotInteger carries HINCRBY's error text
// in prev.
var incScript = redis.NewScript(prelude + `
local prev = redis.call("HGET", KEYS[1], ARGV[3])
local res = redis.pcall("HINCRBY", KEYS[1], ARGV[3], ARGV[4])
if type(res) == "table" and res.err then return nochange(-1, res.err) end
local v = redis.call("HGET", KEYS[1], ARGV[3])
local e, r = commit("S" .. #ARGV[3] .. " " .. ARGV[3] .. v)
return {e, r, 1, prev, v, 0}
`)

// appendScript appends values to a list entry. ARGV[3] key, ARGV[4...]
// values. count is the list's length after the append.
var appendScript = redis.NewScript(prelude + `
local prev = redis.call("HGET", KEYS[1], ARGV[3])
local t = decode(prev or "")
if not t then return nochange(-2, prev) end
local add = {}
for i = 4, #ARGV do add[#add + 1] = ARGV[i] end
local v = (prev or "") .. encode(add)
if #v > tonumber(ARGV[2]) then return nochange(-3, prev) end
local e, r = put(ARGV[3], v)
return {e, r, 1, prev, v, #t + #add}
`)

// appendUniqueScript appends the values a list entry does not hold yet,
// each once. ARGV[3] key, ARGV[4...] values. count is how many were added;
// statusNone when none was.
var appendUniqueScript = redis.NewScript(prelude + `
local prev = redis.call("HGET", KEYS[1], ARGV[3])
local t = decode(prev or "")
if not t then return nochange(-2, prev) end
local seen, add = {}, {}
for _, x in ipairs(t) do seen[x] = true end
for i = 4, #ARGV do
  local x = ARGV[i]
  if not seen[x] then seen[x] = true; add[#add + 1] = x end
end
if #add == 0 then return nochange(0, prev, 0) end
local v = (prev or "") .. encode(add)
if #v > tonumber(ARGV[2]) then return nochange(-3, prev) end
local e, r = put(ARGV[3], v)
return {e, r, 1, prev, v, #add}
`)

// removeValuesScript removes every occurrence of the values from a list
// entry and deletes the entry when the list becomes empty. ARGV[3] key,
// ARGV[4...] values. count is how many elements were removed; statusNone
// when none was.
var removeValuesScript = redis.NewScript(prelude + `
local prev = redis.call("HGET", KEYS[1], ARGV[3])
if not prev then return nochange(0, false, 0) end
local t = decode(prev)
if not t then return nochange(-2, prev) end
local drop, keep = {}, {}
for i = 4, #ARGV do drop[ARGV[i]] = true end
for _, x in ipairs(t) do
  if not drop[x] then keep[#keep + 1] = x end
end
local n = #t - #keep
if n == 0 then return nochange(0, prev, 0) end
if #keep == 0 then
  local e, r = del(ARGV[3])
  return {e, r, 2, prev, false, n}
end
local v = encode(keep)
local e, r = put(ARGV[3], v)
return {e, r, 1, prev, v, n}
`)

// resetScript deletes every entry. No ARGV of its own. count is the
// number of entries deleted; statusNone when there were none.
var resetScript = redis.NewScript(prelude + `
local n = redis.call("HLEN", KEYS[1])
if n == 0 then return nochange(0, false, 0) end
redis.call("DEL", KEYS[1])
local e, r = commit("C")
return {e, r, 3, false, false, n}
`)

// destroyScript deletes the map's hash and revision and publishes "X" with
// the revision the map would have had next. KEYS as the write scripts; no
// ARGV. Returns the number of entries deleted.
var destroyScript = redis.NewScript(`
local n = redis.call("HLEN", KEYS[1])
local st = redis.call("HMGET", KEYS[2], "epoch", "` + RevField + `")
redis.call("DEL", KEYS[1], KEYS[2])
redis.call("PUBLISH", KEYS[3], (st[1] or "-") .. " " .. ((tonumber(st[2]) or 0) + 1) .. " X")
return n
`)

// loadScript reads a consistent snapshot. KEYS[1] the hash, KEYS[2] the
// revision hash. Returns {epoch or "", rev or "0", HGETALL as a flat
// array}.
var loadScript = redis.NewScript(`
local st = redis.call("HMGET", KEYS[2], "epoch", "` + RevField + `")
return {st[1] or "", st[2] or "0", redis.call("HGETALL", KEYS[1])}
`)
