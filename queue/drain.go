package queue

import (
	"context"
	"fmt"

	"github.com/redis/go-redis/v9"

	"github.com/shepherd-go/shepherd/internal/script"
)

// Drain asks every live process of the queue that serves to switch its
// Server to ModeDrain, as Server.SetMode(ModeDrain) does in the process:
// each server runs what it can take now, then stops by itself and its
// Done closes. It returns how many processes were asked: those whose
// last keep-alive showed a server (already draining or not), and
// ErrQueueNotFound when the queue does not exist (nothing is written).
// It costs one script call, O(processes), in the home shard (every
// process keeps alive there, also on a queue of many shards).
//
// The request is stored with the queue, per process and per server, and
// every process reads its own on its keep-alive; a pub/sub message makes
// the processes keep alive at once, so a server usually switches within
// a round trip or two. A process cut off from pub/sub at that moment
// switches at its next keep-alive instead (within TTL/3), and a paused
// one when it comes back, even after it was declared dead meanwhile.
//
// Drain names the servers that exist when it runs: a server started
// later, by a new process or by one that was asked (after its server
// stopped), serves as usual, and a server switched back with
// SetMode(ModeServe) after it applied the request stays so. Limit: Serve
// announces a new server with a keep-alive sent at once but in the
// background, so a server started less than a round trip to Redis
// before Drain may be neither asked nor counted.
func (q *Client) Drain(ctx context.Context) (int, error) {
	res, err := script.Run(ctx, q.rdb, drainScript, "queue: drain", q.lay.common(q.lay.drains), q.lay.commonArgs()...) // the home shard
	if err != nil {
		return 0, err
	}
	n, _ := res.(int64)
	if n < 0 {
		return 0, fmt.Errorf("%w: %q", ErrQueueNotFound, q.name)
	}
	return int(n), nil
}

// drainScript asks every live process that serves, by its record (its
// server's serial "srv"), to switch that server to drain: it stores the
// serial in drains, which the process reads on its next keep-alive, and
// publishes on the drain channel so that the processes keep alive at
// once. Requests left by processes no longer registered are dropped.
//
//	KEYS[17] drains
//
// Returns how many processes were asked, or -1 when the queue does not
// exist (nothing is written).
var drainScript = redis.NewScript(prelude + `
if redis.call('EXISTS', K_SETTINGS) == 0 then return -1 end
local old = redis.call('HGETALL', KEYS[17]) -- not HKEYS: ACLCommands lists what the scripts use
for i = 1, #old, 2 do
  if redis.call('HEXISTS', K_ALIVE, old[i]) == 0 then redis.call('HDEL', KEYS[17], old[i]) end
end
local n = 0
local t = now()
local alive = redis.call('HGETALL', K_ALIVE)
for i = 1, #alive, 2 do
  local p = alive[i]
  if not leaseOf(p, t) then
    local rec = redis.call('HGET', K_PROCS, p)
    local ok, r = false, nil
    if rec then ok, r = pcall(cjson.decode, rec) end
    local srv = ok and type(r) == 'table' and tonumber(r.srv) or 0
    if srv > 0 then
      redis.call('HSET', KEYS[17], p, string.format('%d', srv))
      n = n + 1
    end
  end
end
if n > 0 then redis.call(PUBLISH, P_CHAN .. 'drain', '') end
return n
`)
