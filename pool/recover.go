package pool

import (
	"context"
	"fmt"
	"log/slog"
	"strconv"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/shepherd-go/shepherd/streaming"
)

// maxSlowStarts is how many times a DispatchJob's Start may overrun
// PendingJobTTL before DispatchJob fails with a *StartError saying so.
const maxSlowStarts = 3

// janitorLoop runs on every full node; a lease lets one of them work at a
// time. Its scripts are fenced by generations, so two janitors at once
// (a lease lost while frozen) do no harm, only double work.
//
// Each pass, the janitor declares dead the workers and nodes whose
// keep-alive lapsed (by Redis's clock), recovers their jobs, and takes
// over the job events that routers of dead nodes read but did not route.
// Liveness, not a fixed grace, decides: a paused or cut-off process's
// blocked read on the job stream stays registered at Redis and keeps
// receiving events, so they are taken from it as soon as its node is
// declared dead, and again on every pass while it stays dead.
func (n *Node) janitorLoop() {
	tick := n.cfg.janitorTick()
	t := time.NewTicker(tick)
	defer t.Stop()
	lastRecover := time.Time{}
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
			// The routers' consumers first: one created after this read
			// belongs to a node registered before nodes() reads.
			consumers, cerr := n.sink.Consumers(ctx)
			reaped := n.reap(ctx)
			live, dead, nerr := n.nodes(ctx)
			// Jobs belong to workers: a dead node's workers are reaped
			// with it, and its router's events are taken over below.
			var recovered int64
			if len(reaped) > 0 || time.Since(lastRecover) >= n.cfg.recoverEvery() {
				recovered = n.recoverJobs(ctx)
				n.pruneWithdrawn(ctx)
				lastRecover = time.Now()
			}
			if len(reaped) > 0 || recovered > 0 {
				n.recordRecovery(ctx, reaped, recovered)
			}
			if nerr == nil {
				n.removeNodes(ctx, dead)
				if cerr == nil {
					n.takeOverRouters(ctx, consumers, live)
				}
			}
		}
		cancel()
	}
}

// holdLease takes or renews the janitor lease.
func (n *Node) holdLease(ctx context.Context, ttl time.Duration) bool {
	ok, err := n.rdb.SetNX(ctx, n.lay.janitor, n.id, ttl).Result()
	if err != nil {
		return false
	}
	if ok {
		return true
	}
	res, err := n.run(ctx, renewLeaseScript, "renew lease", []string{n.lay.janitor}, n.id, ttl.Milliseconds())
	return err == nil && res == int64(1)
}

// renewLeaseScript extends a lease held by ARGV[1].
//
//	KEYS[1] the lease; ARGV[1] holder, ARGV[2] TTL in ms
//
// Returns 1 if renewed, 0 if someone else holds it.
var renewLeaseScript = redis.NewScript(`
if redis.call("GET", KEYS[1]) == ARGV[1] then
  redis.call("PEXPIRE", KEYS[1], ARGV[2])
  return 1
end
return 0
`)

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
// by Redis's clock.
//
//	KEYS[1] alive, KEYS[2] workers map
//	ARGV[1] worker TTL in ms
//
// Returns the ids of dead workers.
var reapScript = redis.NewScript(`
local t = redis.call("TIME")
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local dead = {}
local ids = redis.call("HKEYS", KEYS[2])
for _, id in ipairs(ids) do
  local seen = redis.call("HGET", KEYS[1], "w:" .. id)
  if not seen or now - tonumber(seen) > tonumber(ARGV[1]) then dead[#dead + 1] = id end
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
var nodesScript = redis.NewScript(`
local t = redis.call("TIME")
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local live, dead, seen = {}, {}, {}
local all = redis.call("HGETALL", KEYS[1])
for i = 1, #all, 2 do
  if string.sub(all[i], 1, 2) == "n:" then
    local id = string.sub(all[i], 3)
    seen[id] = true
    if now - tonumber(all[i + 1]) > tonumber(ARGV[1]) then dead[#dead + 1] = id else live[#live + 1] = id end
  end
end
for _, id in ipairs(redis.call("HKEYS", KEYS[2])) do
  if not seen[id] then dead[#dead + 1] = id end
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
var removeNodesScript = redis.NewScript(`
local t = redis.call("TIME")
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local n = 0
for i = 2, #ARGV do
  local id = ARGV[i]
  local seen = redis.call("HGET", KEYS[1], "n:" .. id)
  if not seen or now - tonumber(seen) > tonumber(ARGV[1]) then
    redis.call("HDEL", KEYS[1], "n:" .. id)
    redis.call("HDEL", KEYS[2], id)
    redis.call("DEL", KEYS[1 + i])
    n = n + 1
  end
end
return n
`)

// takeOverRouters takes the job events pending for router consumers whose
// node is not live, and deletes those consumers: this node's router
// routes the events at once. consumers must have been read before live.
func (n *Node) takeOverRouters(ctx context.Context, consumers []streaming.ConsumerInfo, live map[string]bool) {
	for _, c := range consumers {
		if c.Name == n.sink.Consumer() || live[c.Name] {
			continue
		}
		got, err := n.sink.TakeOver(ctx, c.Name)
		if err != nil {
			n.logger.Warn("taking over a dead router's events failed", slog.String("dead_node", c.Name), slog.Any("error", err))
			continue
		}
		if got > 0 {
			n.logger.Warn("took over the job events a dead node's router held", slog.String("dead_node", c.Name), slog.Int("events", got))
		}
	}
}

// recoverJobs recovers the jobs of workers that are gone and the jobs
// stuck before Start for longer than PendingJobTTL, one HSCAN step of the
// records at a time: recoverScanScript finds them, this node chooses each
// one's new owner from its slot table, and recoverScript acts. It returns
// how many jobs it routed or queued again (those that recoverScript counts
// as recovered), even when a step failed.
func (n *Node) recoverJobs(ctx context.Context) int64 {
	counts := map[string]int64{}
	for cursor := "0"; ; {
		res, err := n.run(ctx, recoverScanScript, "recover", n.lay.recordKeys(),
			n.cfg.pendingJobTTL.Milliseconds(), cursor, recoverChunk)
		if err != nil {
			n.logger.Warn("recover failed", slog.Any("error", err))
			break
		}
		out, _ := res.([]any)
		if len(out) != 2 {
			n.logger.Warn("recover: unexpected reply", slog.Any("reply", res))
			break
		}
		if found, _ := out[1].([]any); len(found) > 0 {
			if err := n.recoverFound(ctx, found, counts); err != nil {
				n.logger.Warn("recover failed", slog.Any("error", err))
				break
			}
		}
		if cursor, _ = out[0].(string); cursor == "0" || cursor == "" {
			break
		}
	}
	if moved := counts["ROUTED"] + counts["REQUEUED"]; moved > 0 {
		n.metrics.add(ctx, n.metrics.requeued, moved)
		n.logger.Info("jobs recovered", slog.Int64("handed_to_owner", counts["ROUTED"]), slog.Int64("queued", counts["REQUEUED"]))
	}
	if failed := counts["FAILED"]; failed > 0 {
		n.metrics.add(ctx, n.metrics.startFailures, failed)
		n.logger.Warn("dispatches failed: their Start did not return within PendingJobTTL",
			slog.Int64("jobs", failed), slog.Int("attempts", maxSlowStarts), slog.Duration("pending_job_ttl", n.cfg.pendingJobTTL))
	}
	return counts["ROUTED"] + counts["REQUEUED"]
}

// recoverFound runs recoverScript for the jobs recoverScanScript found,
// and adds its outcomes to counts.
func (n *Node) recoverFound(ctx context.Context, found []any, counts map[string]int64) error {
	t := n.table()
	sk := newScriptKeys(n.lay.jobs, n.lay.payloads, n.lay.jobStream, n.lay.workers, n.lay.slotsRev, n.lay.counters)
	args := []any{n.cfg.pendingJobTTL.Milliseconds(), strconv.FormatInt(t.rev, 10), maxSlowStarts,
		fmt.Sprintf("the Start handler did not return within PendingJobTTL (%v) on %d attempts", n.cfg.pendingJobTTL, maxSlowStarts)}
	stream := func(prefix, id string) int {
		if id == "" || id == noReply {
			return 0
		}
		return sk.add(prefix + id)
	}
	for _, v := range found {
		f, _ := v.([]any)
		if len(f) != 7 {
			return fmt.Errorf("pool: recover: malformed entry %v", v)
		}
		str := func(i int) string { s, _ := f[i].(string); return s }
		key := str(0)
		gen, err := strconv.ParseInt(str(2), 10, 64)
		if err != nil {
			return fmt.Errorf("pool: recover: malformed entry %v", v)
		}
		owner := t.owner(key)
		args = append(ref(args, key, str(1), gen), str(3), str(4), owner,
			stream(n.lay.wprefix, owner), stream(n.lay.nprefix, str(5)), stream(n.lay.nprefix, str(6)))
	}
	res, err := n.run(ctx, recoverScript, "recover", sk.keys, args...)
	outcomes, err := perJob(res, err, len(found), "recover")
	if err != nil {
		return err
	}
	for _, o := range outcomes {
		s, _ := o.(string)
		counts[s]++
	}
	return nil
}

// recoverChunk is how many job records one recover call looks at: about
// a millisecond of Redis time, so that a pool of 100,000 jobs does not
// stall every other client for a tenth of a second on each pass.
const recoverChunk = 500

// recoverScanScript finds, in one HSCAN step of the job records, the jobs
// that need recovery: those whose worker is gone, and those stuck between
// routing and a started Start for longer than the pending TTL. It changes
// nothing; recoverScript acts on what it returns, after the caller chose
// each job's new owner.
//
//	KEYS[1] jobs, KEYS[2] payloads, KEYS[3] workers map
//	ARGV[1] pending TTL in ms, ARGV[2] HSCAN cursor ("0" to begin),
//	ARGV[3] records per call
//
// Returns {next cursor, {{key, nonce, generation, worker, state,
// dispatcher node or "", stop requester node or ""}...}}.
var recoverScanScript = redis.NewScript(prelude + `
local now = now_ms()
local step = redis.call("HSCAN", KEYS[1], ARGV[2], "COUNT", ARGV[3])
local all = step[2]
local out = {}
for i = 1, #all, 2 do
  local key, r = all[i], cjson.decode(all[i + 1])
  if r.s ~= S_QUEUED then
    local gone = r.w == "" or redis.call("HEXISTS", KEYS[3], r.w) == 0
    local stuck = (r.s == S_ROUTED or r.s == S_CLAIMED) and now - r.t > tonumber(ARGV[1])
    if gone or stuck then
      out[#out + 1] = {key, r.n, tostring(r.g), r.w, r.s, r.rd or "", r.sr or ""}
    end
  end
end
return {step[1], out}
`)

// recoverScript recovers the jobs recoverScanScript found, each only if
// its record is still as found (same generation, worker and state) and
// still needs it. A stopping job whose worker is gone is deleted, and its
// StopJob answered (and its DispatchJob, if that still waits). A job
// claimed for longer than the pending TTL by a live worker (its Start
// does not return) whose DispatchJob waits is deleted after
// maxSlowStarts starts, failing the DispatchJob with a *StartError that
// says so. Any other job whose worker is gone, or that is stuck, is
// handed straight to its new owner when the janitor's copy of the slot
// table is current (the fence routeScript applies) and names a live
// worker, else queued again for the routers. Handing it over directly
// keeps recovered jobs away from the job stream, whose blocked reads a
// paused node may still hold (until it is declared dead too). The jobs
// routed or queued again are counted as recovered in the counters hash.
//
//	KEYS[1] jobs, KEYS[2] payloads, KEYS[3] job stream, KEYS[4] workers
//	map, KEYS[5] slots map revision, KEYS[6] counters, KEYS[7..] the new
//	owners' and the answered nodes' streams
//	ARGV[1] pending TTL in ms, ARGV[2] the slots revision the owners were
//	chosen under, ARGV[3] starts after which a slow start fails its
//	dispatch, ARGV[4] the failure message, then per job: job ref,
//	worker, state, new owner ("" for none), then the indexes in KEYS
//	(counted from KEYS[7] as 1; 0 for none) of the new owner's stream,
//	of the waiting dispatcher's and of the stop requester's
//
// Returns, per job, "ROUTED", "REQUEUED", "DELETED", "FAILED" or "STALE".
var recoverScript = redis.NewScript(prelude + `
local now = now_ms()
local ttl = tonumber(ARGV[1])
local current = redis.call("HGET", KEYS[5], REV_FIELD) == ARGV[2]
local recovered = 0
local out = {}
for i = 5, #ARGV, 9 do
  local key, r = job(i)
  local owner = ARGV[i + 5]
  local oi, di, si = tonumber(ARGV[i + 6]), tonumber(ARGV[i + 7]), tonumber(ARGV[i + 8])
  local res = "STALE"
  if r and r.w == ARGV[i + 3] and r.s == ARGV[i + 4] then
    local gone = r.w == "" or redis.call("HEXISTS", KEYS[4], r.w) == 0
    local stuck = (r.s == S_ROUTED or r.s == S_CLAIMED) and now - r.t > ttl
    if r.s == S_STOPPING then
      if gone then
        delrec(key)
        if si > 0 then send_reply(KEYS[6 + si], r.sq, REPLY_OK) end
        if di > 0 then send_reply(KEYS[6 + di], r.rq, REPLY_STOPPED .. "StopJob ended it before its Start") end
        res = "DELETED"
      end
    elseif gone or stuck then
      if not gone and r.s == S_CLAIMED and r.rd and r.a >= tonumber(ARGV[3]) then
        delrec(key)
        if di > 0 then send_reply(KEYS[6 + di], r.rq, REPLY_START_FAILED .. r.w .. "\n" .. ARGV[4]) end
        res = "FAILED"
      elseif owner ~= "" and oi > 0 and current and (owner ~= r.w or not gone)
        and redis.call("HEXISTS", KEYS[4], owner) == 1 then
        reroute(key, r, now, owner, KEYS[6 + oi])
        res = "ROUTED"
      else
        requeue(key, r, now, KEYS[3])
        res = "REQUEUED"
      end
    end
  end
  if res == "ROUTED" or res == "REQUEUED" then recovered = recovered + 1 end
  out[#out + 1] = res
end
count(KEYS[6], C_RECOVERED, recovered)
return out
`)
