package member

// Lua defines the helpers that owners' scripts start with: every group
// below. It declares only local functions, so it can precede any script
// body. A script on a hot path takes only the groups it uses (LuaClock,
// LuaLease, LuaKeepAlive, LuaSettings, LuaLedger): each helper is a
// closure made on every call.
//
//	now_ms()                   Redis's clock (TIME) in ms
//	lease_hold(key, who, ttl)  takes the lease at key for who, or renews
//	                           it if who holds it, for ttl ms; returns
//	                           whether who holds it after the call
//	lease_held(key, who)       whether who holds the lease (the fence of
//	                           a holder's work)
//	lease_drop(key, who)       releases the lease if who holds it
//	seen(key, id, now)         records a keep-alive: id was alive at now
//	                           (ms) in the hash at key; returns whether id
//	                           had no keep-alive there
//	renew(key, id, now)        records a keep-alive only if id has one
//	                           (it was not declared dead); returns
//	                           whether it had
//	standing(key, id, unit, now)
//	                           records a keep-alive and returns the
//	                           member's Standing: "ok", "revived" (it had
//	                           none: declared dead) or "lost" (the unit's
//	                           key unit is gone too: Redis lost the unit)
//	lapsed(at, now, ttl)       whether a keep-alive recorded at at (ms, or
//	                           nil for none) is older than ttl ms at now
//	settle_settings(key, live, adopt_only, from)
//	                           settles the unit-wide settings of a joining
//	                           member (see Settle)
//	token_hold(key, who, token, ttl, now)
//	                           a fenced lease in the hash at key (see
//	                           LuaTokenLease); returns the token held
//	                           after the call, or false and the ms until
//	                           the holder's lease lapses
//	token_drop(key, token)     gives that lease up if token holds it
//	token_fenced(key, token)   whether a write carrying token must be
//	                           refused (see LuaTokenFence)
//	withdraw_call(key, nonce, now, ttl)
//	                           records a failed call's nonce as withdrawn
//	                           for ttl ms (see Withdraw)
//	was_withdrawn(key, nonce)  whether a call's nonce was withdrawn: its
//	                           work must be refused
const Lua = LuaClock + LuaLease + LuaKeepAlive + LuaSettings + LuaLedger + LuaTokenLease + LuaTokenFence

// LuaClock: now_ms and lapsed.
const LuaClock = `
local function now_ms()
  local t = redis.call("TIME")
  return tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
end
local function lapsed(at, now, ttl)
  return not at or now - tonumber(at) > tonumber(ttl)
end
`

// LuaLease: lease_hold, lease_held and lease_drop.
const LuaLease = `
local function lease_hold(key, who, ttl)
  local holder = redis.call("GET", key)
  if holder == who then
    redis.call("PEXPIRE", key, ttl)
    return true
  end
  if not holder then
    redis.call("SET", key, who, "PX", ttl)
    return true
  end
  return false
end
local function lease_held(key, who)
  return redis.call("GET", key) == who
end
local function lease_drop(key, who)
  if redis.call("GET", key) == who then redis.call("DEL", key) end
end
`

// LuaKeepAlive: seen, renew and standing.
const LuaKeepAlive = `
local function seen(key, id, now)
  return redis.call("HSET", key, id, now) == 1
end
local function renew(key, id, now)
  if redis.call("HEXISTS", key, id) == 0 then return false end
  redis.call("HSET", key, id, now)
  return true
end
local function standing(key, id, unit, now)
  if not seen(key, id, now) then return "ok" end
  if redis.call("EXISTS", unit) == 1 then return "revived" end
  return "lost"
end
`

// LuaSettings: settle_settings.
const LuaSettings = `
local function settle_settings(key, live, adopt_only, from)
  local out, write = {"OK"}, {}
  for i = from, #ARGV, 3 do
    local name, mine, explicit = ARGV[i], ARGV[i + 1], ARGV[i + 2] == "1"
    local use = redis.call("HGET", key, name)
    if not use or (explicit and use ~= mine and not live and not adopt_only) then
      use = mine
      if not adopt_only then write[#write + 1] = name; write[#write + 1] = mine end
    elseif explicit and use ~= mine and not adopt_only then
      return {"MISMATCH", name, use, mine}
    end
    out[#out + 1] = name; out[#out + 1] = use
  end
  if #write > 0 then redis.call("HSET", key, unpack(write)) end
  return out
end
`

// LuaLedger: withdraw_call and was_withdrawn.
const LuaLedger = `
local function withdraw_call(key, nonce, now, ttl)
  redis.call("ZADD", key, now, nonce)
  redis.call("ZREMRANGEBYSCORE", key, "-inf", now - tonumber(ttl))
  redis.call("PEXPIRE", key, ttl)
end
local function was_withdrawn(key, nonce)
  return redis.call("ZSCORE", key, nonce) ~= false
end
`

// LuaTokenLease: token_hold and token_drop, a lease whose holder's work
// is fenced. Unlike lease_hold's (a key holding the holder's name), it
// lives in fields of a hash (token, holder, until in ms of Redis's clock,
// gen, since), and each unbroken holding has a token of its own: the
// holder's name and a generation. A lease that lapsed is never renewed;
// whoever takes it next, its former holder included, takes a new
// generation, so a write carrying an old token is refused
// (token_fenced) even when the same process holds the lease again. The
// pool's schedules and cluster tickers use it.
const LuaTokenLease = `
local function token_hold(key, who, token, ttl, now)
  local f = redis.call("HMGET", key, "token", "until")
  local cur, till = f[1], tonumber(f[2] or 0)
  if cur and till >= now then
    if cur ~= token then return false, till - now end
    redis.call("HSET", key, "until", now + ttl)
    return cur
  end
  local gen = redis.call("HINCRBY", key, "gen", 1)
  cur = who .. ":" .. gen
  redis.call("HSET", key, "token", cur, "holder", who, "until", now + ttl, "since", now)
  return cur
end
local function token_drop(key, token)
  if redis.call("HGET", key, "token") == token then
    redis.call("HSET", key, "until", 0)
  end
end
`

// LuaTokenFence: token_fenced(key, token), whether a write carrying token
// must be refused because the lease at key (LuaTokenLease) lapsed or
// passed on. An empty token is never fenced. It needs now_ms (LuaClock);
// a hot path's script takes it without LuaTokenLease.
const LuaTokenFence = `
local function token_fenced(key, token)
  if token == nil or token == "" then return false end
  local f = redis.call("HMGET", key, "token", "until")
  return f[1] ~= token or tonumber(f[2] or 0) < now_ms()
end
`
