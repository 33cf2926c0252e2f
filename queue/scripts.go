package queue

import "github.com/redis/go-redis/v9"

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
