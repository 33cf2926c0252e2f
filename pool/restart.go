package pool

import (
	"context"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/shepherd-go/shepherd/internal/member"
)

// park is how a worker with a stable id leaves when its node closes for a
// restart (identity.go): it stops its jobs here, but hands none over and
// keeps its slot, its entry in the workers map and its stream, and
// records that it is restarting until now + the grace. Jobs dispatched to
// it meanwhile wait in its stream; its successor (registerStable) takes
// them all back, or the janitor moves them once the grace has passed.
func (w *Worker) park(ctx context.Context) error {
	n := w.node
	w.stopOnce.Do(func() { close(w.stopReq) })
	<-w.done
	stopCtx, cancel := context.WithTimeout(ctx, n.cfg.stopTimeout())
	for key, h := range w.jobs {
		_ = w.stopRun(stopCtx, key, h.gen)
		delete(w.jobs, key)
	}
	cancel()
	var errs []error
	if err := n.inbox.Remove(ctx, w.stream); err != nil {
		errs = append(errs, err)
	}
	n.inboxMu.Lock()
	delete(n.inboxes, w.stream.Name())
	n.inboxMu.Unlock()
	if _, err := n.run(ctx, parkScript, "park", []string{n.lay.alive, n.lay.workers}, w.id, n.id, n.cfg.restartGrace.Milliseconds()); err != nil {
		errs = append(errs, err)
	}
	if len(errs) > 0 {
		return fmt.Errorf("pool: park worker %s: %w", w.id, errs[0])
	}
	return nil
}

// parkScript records that a worker restarts until now + the grace, if this
// node still holds it.
//
//	KEYS[1] alive, KEYS[2] workers map
//	ARGV[1] worker id, ARGV[2] node id, ARGV[3] restart grace in ms
//
// Returns 1, or 0 when the worker is not this node's any more.
var parkScript = redis.NewScript(member.LuaClock + workerLua + `
if not worker_of(KEYS[2], ARGV[1], ARGV[2]) then return 0 end
redis.call("HSET", KEYS[1], "r:" .. ARGV[1], now_ms() + tonumber(ARGV[3]))
return 1
`)

// registerStable records the keep-alive of a worker with a stable id,
// ending its restart, if this node holds its identity; a node whose
// identity another process took over gets ErrNodeIDInUse.
func (w *Worker) registerStable(ctx context.Context) error {
	n := w.node
	res, err := n.run(ctx, registerStableScript, "register worker", []string{n.lay.nodeIDs, n.lay.alive},
		n.cfg.identity, n.id, w.id)
	if err != nil {
		return err
	}
	if res != int64(1) {
		return fmt.Errorf("%w: %q was taken over by another process; this node's workers stay out of the pool", ErrNodeIDInUse, n.cfg.identity)
	}
	return nil
}

// registerStableScript records a stable worker's keep-alive and ends its
// restart, if its node holds the identity.
//
//	KEYS[1] identities, KEYS[2] alive
//	ARGV[1] identity, ARGV[2] node id, ARGV[3] worker id
//
// Returns 1, or 0 when another node holds the identity.
var registerStableScript = redis.NewScript(member.Lua + `
if redis.call("HGET", KEYS[1], ARGV[1]) ~= ARGV[2] then return 0 end
seen(KEYS[2], "w:" .. ARGV[3], now_ms())
redis.call("HDEL", KEYS[2], "r:" .. ARGV[3])
return 1
`)

// slotOf returns the slot the table gives worker id, or -1.
func (t table) slotOf(id string) int {
	for s, w := range t.slots {
		if w == id {
			return s
		}
	}
	return -1
}

// reclaim takes back the jobs whose records name this worker, after a
// restart: each starts here once more, in a new generation (which fences
// a former process that still has a copy), without any dispatch. A job
// with a stop on its way is ended (nothing runs it) and its StopJob
// answered. It finds them with reclaimable, and restarts them
// recoverChunk at a time; it returns how many it restarts.
func (w *Worker) reclaim(ctx context.Context) (int, error) {
	n := w.node
	found, err := n.reclaimable(ctx, w)
	if err != nil {
		return 0, err
	}
	restarted := 0
	for len(found) > 0 {
		keys := found[:min(len(found), recoverChunk)]
		found = found[len(keys):]
		chunk, err := w.refreshFound(ctx, keys)
		if err == nil && len(chunk) > 0 {
			var k int
			k, err = w.reclaimFound(ctx, chunk)
			restarted += k
		}
		if err != nil {
			n.forgetReclaims() // the next try walks the records again
			return restarted, err
		}
	}
	if restarted > 0 {
		w.logger.Info("jobs taken back after a restart", slog.Int("jobs", restarted))
	}
	return restarted, nil
}

// reclaimSpan is how many of a node's stable worker indexes one walk
// through the job records looks for: a restarted node's workers, added
// one after another, share the walk of the first (a walk reads every
// record, about 2 µs of Redis CPU each: seconds at a million jobs), and
// a worker of a higher index walks for itself.
const reclaimSpan = 64

// reclaims is what a restarted node's walk through the job records found
// for its stable workers not added yet (reclaimable).
type reclaims struct {
	mu    sync.Mutex
	at    time.Time           // when the walk ran; zero: none kept
	found map[string][]string // worker id → the keys of its jobs
}

// reclaimable returns the keys of the jobs whose records name worker w,
// as reclaimScanScript finds them: from the node's walk for all its first
// reclaimSpan stable workers, kept for RestartGrace (the janitor takes
// the jobs of a worker not back by then; reclaimScript checks that each
// record is still as found), or, past reclaimSpan, from a walk of its
// own.
func (n *Node) reclaimable(ctx context.Context, w *Worker) ([]string, error) {
	if w.index >= reclaimSpan {
		found, err := n.reclaimScan(ctx, []string{w.id})
		return found[w.id], err
	}
	r := &n.reclaims
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.at.IsZero() || time.Since(r.at) > n.cfg.restartGrace {
		// A worker's id is the same in every shard: the root node's.
		root := n.root()
		ids := make([]string, reclaimSpan)
		for i := range ids {
			ids[i] = stableWorkerID(root.pool, root.cfg.identity, i)
		}
		found, err := n.reclaimScan(ctx, ids)
		if err != nil {
			return nil, err
		}
		r.found, r.at = found, time.Now()
	}
	mine := r.found[w.id]
	delete(r.found, w.id)
	return mine, nil
}

// forgetReclaims drops what the node's walk found: a reclaim that failed
// midway lost its entries, and the next one walks again.
func (n *Node) forgetReclaims() {
	n.reclaims.mu.Lock()
	n.reclaims.found, n.reclaims.at = nil, time.Time{}
	n.reclaims.mu.Unlock()
}

// reclaimScan walks the job records, in steps of recoverChunk, for the
// jobs whose records name one of the workers ids, and returns their keys
// by worker.
func (n *Node) reclaimScan(ctx context.Context, ids []string) (map[string][]string, error) {
	n.root().test.reclaimWalks.Add(1)
	found := map[string][]string{}
	args := make([]any, 0, 2+len(ids))
	args = append(args, "0", recoverChunk)
	for _, id := range ids {
		args = append(args, id)
	}
	for {
		res, err := n.run(ctx, reclaimScanScript, "reclaim", []string{n.lay.jobs, n.lay.payloads}, args...)
		if err != nil {
			return nil, err
		}
		out, _ := res.([]any)
		if len(out) != 2 {
			return nil, fmt.Errorf("pool: reclaim: unexpected reply %v", res)
		}
		pairs, _ := out[1].([]any)
		if len(pairs)%2 != 0 {
			return nil, fmt.Errorf("pool: reclaim: unexpected reply %v", res)
		}
		for i := 0; i < len(pairs); i += 2 {
			key, _ := pairs[i].(string)
			id, _ := pairs[i+1].(string)
			found[id] = append(found[id], key)
		}
		cursor, _ := out[0].(string)
		if cursor == "0" || cursor == "" {
			return found, nil
		}
		args[0] = cursor
	}
}

// reclaimRef is a job to reclaim, as its record is read just before
// (refreshFound): reclaimScript acts only if the record is still so.
type reclaimRef struct {
	key, nonce string
	gen        int64
	disp, stop string // the nodes to answer: its waiting DispatchJob's, its StopJob's ("" for none)
}

// refreshFound reads the records of the jobs a walk found for w (keys),
// in one call, and returns them as of now: a walk kept for a node's later
// workers is seconds old, and a StopJob or a DispatchJob since names a
// node to answer that reclaimScript must be given. The jobs whose records
// no longer name w, or are queued, are left out.
func (w *Worker) refreshFound(ctx context.Context, keys []string) ([]reclaimRef, error) {
	n := w.node
	raws, err := n.rdb.HMGet(ctx, n.lay.jobs, keys...).Result()
	if err != nil {
		return nil, fmt.Errorf("pool: reclaim: %w", err)
	}
	out := make([]reclaimRef, 0, len(keys))
	for i, v := range raws {
		raw, ok := v.(string)
		if !ok {
			continue // ended meanwhile
		}
		r, err := parseRecord(raw)
		if err != nil {
			return nil, fmt.Errorf("pool: reclaim: job %q: %w", keys[i], err)
		}
		if r.Worker != w.id || r.State == stateQueued {
			continue
		}
		out = append(out, reclaimRef{key: keys[i], nonce: r.Nonce, gen: r.Gen, disp: r.DispNode, stop: r.StopNode})
	}
	return out, nil
}

// reclaimFound runs reclaimScript for the jobs reclaimScanScript found.
func (w *Worker) reclaimFound(ctx context.Context, found []reclaimRef) (int, error) {
	n := w.node
	sk := newScriptKeys(n.lay.jobs, n.lay.payloads, n.lay.workers, w.stream.Key())
	args := []any{w.id, n.id}
	stream := func(id string) int {
		if id == "" || id == noReply {
			return 0
		}
		return sk.add(n.lay.nprefix + id)
	}
	for _, f := range found {
		args = append(ref(args, f.key, f.nonce, f.gen), stream(f.disp), stream(f.stop))
	}
	res, err := n.run(ctx, reclaimScript, "reclaim", sk.keys, args...)
	if res == "FENCED" {
		return 0, fmt.Errorf("%w: %q: another process holds worker %s now", ErrNodeIDInUse, n.cfg.identity, w.id)
	}
	outcomes, err := perJob(res, err, len(found), "reclaim")
	if err != nil {
		return 0, err
	}
	restarted := 0
	for _, o := range outcomes {
		if o == "RESTARTED" {
			restarted++
		}
	}
	return restarted, nil
}

// reclaimScanScript finds, in one HSCAN step of the job records, the jobs
// whose records name one of the workers given (and that are not queued).
// It changes nothing.
//
//	KEYS[1] jobs, KEYS[2] payloads
//	ARGV[1] HSCAN cursor ("0" to begin), ARGV[2] records per call,
//	ARGV[3..] worker ids
//
// Returns {next cursor, {key, worker id, key, worker id...}}.
var reclaimScanScript = newScript(prelude + `
local want = {}
for i = 3, #ARGV do want[ARGV[i]] = true end
local step = redis.call("HSCAN", KEYS[1], ARGV[1], "COUNT", ARGV[2])
local all = step[2]
local out = {}
for i = 1, #all, 2 do
  local raw = all[i + 1]
  -- A compact record is a running job's (never queued): its worker
  -- tells; a JSON one (compact_worker: nil) is decoded to be judged.
  local w = compact_worker(raw)
  if w == nil then
    local r = decrec(raw)
    if r.s ~= S_QUEUED then w = r.w end
  end
  if w and want[w] then
    out[#out + 1] = all[i]
    out[#out + 1] = w
  end
end
return {step[1], out}
`)

// reclaimScript takes jobs back for a restarted worker, each if its
// record is still as found and still names the worker: a job routed,
// claimed or running there is routed to it again in a new generation; a
// job with a stop on its way is deleted (nothing runs it) and its StopJob
// answered, and its DispatchJob if that still waits. The worker must be
// this node's in the workers map.
//
//	KEYS[1] jobs, KEYS[2] payloads, KEYS[3] workers map, KEYS[4] the
//	worker's stream, KEYS[5..] the answered nodes' streams
//	ARGV[1] worker id, ARGV[2] node id, then per job: job ref, the
//	indexes in KEYS (counted from KEYS[5] as 1; 0 for none) of the
//	waiting dispatcher's and of the stop requester's streams
//
// Returns "FENCED" when another node holds the worker, else, per job,
// "RESTARTED", "STOPPED" or "STALE".
var reclaimScript = newScript(prelude + workerLua + `
local wid = ARGV[1]
if not worker_of(KEYS[3], wid, ARGV[2]) then return "FENCED" end
local now = now_ms()
local out = {}
for i = 3, #ARGV, 5 do
  local key, r = job(i)
  local di, si = tonumber(ARGV[i + 3]), tonumber(ARGV[i + 4])
  if not r or r.w ~= wid or r.s == S_QUEUED then
    out[#out + 1] = "STALE"
  elseif r.s == S_STOPPING then
    delrec(key)
    if si > 0 then send_reply(KEYS[4 + si], r.sq, REPLY_OK) end
    if di > 0 then send_reply(KEYS[4 + di], r.rq, REPLY_STOPPED .. STOPPED_BEFORE_START) end
    out[#out + 1] = "STOPPED"
  else
    reroute(key, r, now, wid, KEYS[4])
    out[#out + 1] = "RESTARTED"
  end
end
return out
`)
