package pool

import (
	"context"
	"fmt"
	"log/slog"
	"strconv"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/shepherd-go/shepherd/internal/member"
)

// janitorLoop runs on every full node; a lease lets one of them work at a
// time. Its scripts are fenced by generations, so two janitors at once
// (a lease lost while frozen) do no harm, only double work.
//
// Each pass, the janitor declares dead the workers and nodes whose
// keep-alive lapsed (by Redis's clock) and recovers their jobs. The job
// events that routers of dead nodes read but did not route are taken
// over by the job stream's sink (streaming.WithMembers), by the same
// keep-alives: liveness, not a fixed grace, decides, since a paused or
// cut-off process's blocked read on the job stream stays registered at
// Redis and keeps receiving events.
func (n *Node) janitorLoop() {
	tick := n.cfg.janitorTick()
	t := time.NewTicker(tick)
	defer t.Stop()
	var walk sweep
	lastSample := time.Time{}
	for {
		select {
		case <-n.ctx.Done():
			return
		case <-t.C:
		}
		if n.errClosed() != nil {
			continue // stopping: the other nodes' janitors take over
		}
		ctx, cancel := context.WithTimeout(n.ctx, janitorPassTimeout)
		n.metrics.tick(ctx, n)
		if n.holdLease(ctx, 4*tick) {
			reaped := n.reap(ctx)
			_, dead, nerr := n.nodes(ctx)
			// Jobs belong to workers: a dead node's workers are reaped
			// with it. Its router's events are taken over by the job
			// stream's sink, which judges routers by the same
			// keep-alives (streaming.WithMembers).
			// A walk through the records recovers their jobs; it may
			// take several passes at depth, and is recorded as one
			// Recovery when it ends.
			if walk.due(len(reaped) > 0) {
				walk.dead = append(walk.dead, reaped...)
				n.recoverJobs(ctx, &walk)
			}
			for _, w := range walk.done {
				n.recordRecovery(ctx, w.dead, w.jobs)
			}
			walk.done = nil
			if nerr == nil {
				n.removeNodes(ctx, dead)
			}
			// The script takes one sample a HistoryStep by Redis's
			// clock; asking twice a step keeps no step without one.
			if time.Since(lastSample) >= HistoryStep/2 {
				n.sampleHistory(ctx)
				lastSample = time.Now()
			}
		}
		cancel()
	}
}

// holdLease takes or renews the janitor lease (member.Lease).
func (n *Node) holdLease(ctx context.Context, ttl time.Duration) bool {
	held, err := member.NewLease(n.rdb, n.lay.janitor, n.id).Hold(ctx, ttl)
	return err == nil && held
}

// reap removes the workers whose keep-alive lapsed and returns their ids.
func (n *Node) reap(ctx context.Context) []string {
	res, err := n.run(ctx, reapScript, "reap", []string{n.lay.alive, n.lay.workers}, n.cfg.workerTTL.Milliseconds())
	if err != nil {
		n.logger.Warn("reap failed", slog.Any("error", err))
		return nil
	}
	found, _ := res.([]any)
	dead := make([]string, 0, len(found))
	t := n.table()
	for _, v := range found {
		id, _ := v.(string)
		dead = append(dead, id)
		n.logger.Warn("worker declared dead", slog.String("dead_worker", id))
		n.metrics.add(ctx, n.metrics.dead, 1)
		for slot, w := range t.slots {
			if w == id {
				if _, err := n.slots.TestAndDelete(ctx, strconv.Itoa(slot), id); err != nil {
					n.logger.Warn("freeing a dead worker's slot", slog.Any("error", err))
				}
			}
		}
		if _, err := n.workers.Delete(ctx, id); err != nil {
			n.logger.Warn("removing a dead worker", slog.Any("error", err))
		}
		if _, err := n.run(ctx, cleanupScript, "cleanup", []string{n.lay.alive, n.lay.wprefix + id}, id); err != nil {
			n.logger.Warn("cleaning up a dead worker", slog.Any("error", err))
		}
	}
	return dead
}

// reapScript lists the workers whose keep-alive is older than the TTL,
// by Redis's clock. A worker with a stable id (identity.go) is dead only
// after its restart grace too: once its restart mark (r:<id>, set when
// its node closed for a restart) has passed, or, without one, once its
// keep-alive is older than the TTL plus the grace its entry names.
//
//	KEYS[1] alive, KEYS[2] workers map
//	ARGV[1] worker TTL in ms
//
// Returns the ids of dead workers.
var reapScript = redis.NewScript(member.Lua + `
local now = now_ms()
local ttl = tonumber(ARGV[1])
local dead = {}
local ids = redis.call("HKEYS", KEYS[2])
for _, id in ipairs(ids) do
  local until_ms = redis.call("HGET", KEYS[1], "r:" .. id)
  local at = redis.call("HGET", KEYS[1], "w:" .. id)
  local gone
  if until_ms then
    gone = now > tonumber(until_ms)
  else
    gone = lapsed(at, now, ttl)
    if gone and at then
      local ok, info = pcall(cjson.decode, redis.call("HGET", KEYS[2], id))
      local grace = ok and type(info) == "table" and tonumber(info.grace) or 0
      gone = lapsed(at, now, ttl + grace)
    end
  end
  if gone then dead[#dead + 1] = id end
end
return dead
`)

// nodes returns the ids of the pool's live and dead nodes (nodesScript).
func (n *Node) nodes(ctx context.Context) (live map[string]bool, dead []string, err error) {
	res, err := n.run(ctx, nodesScript, "nodes", []string{n.lay.alive, n.lay.nodes}, n.cfg.workerTTL.Milliseconds())
	if err != nil {
		n.logger.Warn("listing nodes failed", slog.Any("error", err))
		return nil, nil, err
	}
	out, _ := res.([]any)
	if len(out) != 2 {
		return nil, nil, fmt.Errorf("pool: nodes: unexpected reply %v", res)
	}
	live = map[string]bool{}
	ids, _ := out[0].([]any)
	for _, v := range ids {
		id, _ := v.(string)
		live[id] = true
	}
	ids, _ = out[1].([]any)
	for _, v := range ids {
		id, _ := v.(string)
		dead = append(dead, id)
	}
	return live, dead, nil
}

// nodesScript sorts the pool's nodes into live and dead by their
// keep-alives and Redis's clock: a node is dead when its keep-alive is
// older than the TTL, or when it has a record but no keep-alive.
//
//	KEYS[1] alive, KEYS[2] node records
//	ARGV[1] worker TTL in ms
//
// Returns {{live node ids...}, {dead node ids...}}.
var nodesScript = redis.NewScript(member.Lua + `
local now = now_ms()
local live, dead, known = {}, {}, {}
local all = redis.call("HGETALL", KEYS[1])
for i = 1, #all, 2 do
  if string.sub(all[i], 1, 2) == "n:" then
    local id = string.sub(all[i], 3)
    known[id] = true
    if lapsed(all[i + 1], now, ARGV[1]) then dead[#dead + 1] = id else live[#live + 1] = id end
  end
end
for _, id in ipairs(redis.call("HKEYS", KEYS[2])) do
  if not known[id] then dead[#dead + 1] = id end
end
return {live, dead}
`)

// removeNodes removes dead nodes with what they own: keep-alive, record,
// and their stream with the answers waiting in it. A node that was only
// paused notices at its next keep-alive and rejoins (keepAlive).
func (n *Node) removeNodes(ctx context.Context, dead []string) {
	if len(dead) == 0 {
		return
	}
	keys := []string{n.lay.alive, n.lay.nodes}
	args := []any{n.cfg.workerTTL.Milliseconds()}
	for _, id := range dead {
		keys = append(keys, n.lay.nprefix+id)
		args = append(args, id)
	}
	res, err := n.run(ctx, removeNodesScript, "remove nodes", keys, args...)
	if err != nil {
		n.logger.Warn("removing dead nodes failed", slog.Any("error", err))
		return
	}
	if removed, _ := res.(int64); removed > 0 {
		n.logger.Warn("nodes declared dead and removed", slog.Any("dead_nodes", dead))
		n.metrics.add(ctx, n.metrics.nodesDead, removed)
	}
}

// removeNodesScript removes dead nodes: keep-alive, record and stream
// (with the answers still waiting in it), each only if the node is still
// dead (it may have revived since nodesScript saw it).
//
//	KEYS[1] alive, KEYS[2] node records, KEYS[3..] the nodes' streams
//	ARGV[1] worker TTL in ms, ARGV[2..] node ids, in the order of their
//	streams
//
// Returns the number of nodes removed.
var removeNodesScript = redis.NewScript(member.Lua + `
local now = now_ms()
local n = 0
for i = 2, #ARGV do
  local id = ARGV[i]
  if lapsed(redis.call("HGET", KEYS[1], "n:" .. id), now, ARGV[1]) then
    redis.call("HDEL", KEYS[1], "n:" .. id)
    redis.call("HDEL", KEYS[2], id)
    redis.call("DEL", KEYS[1 + i])
    n = n + 1
  end
end
return n
`)
