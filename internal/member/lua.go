package member

// Lua defines the helpers that owners' scripts start with. It declares
// only local functions, so it can precede any script body:
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
//	lapsed(at, now, ttl)       whether a keep-alive recorded at at (ms, or
//	                           nil for none) is older than ttl ms at now
const Lua = `
local function now_ms()
  local t = redis.call("TIME")
  return tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
end
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
local function seen(key, id, now)
  return redis.call("HSET", key, id, now) == 1
end
local function lapsed(at, now, ttl)
  return not at or now - tonumber(at) > tonumber(ttl)
end
`
