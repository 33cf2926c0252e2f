package pool

import (
	"context"
	"fmt"
	"log/slog"
	"strconv"
	"time"
)

// maxSlowStarts is how many times a DispatchJob's Start may overrun
// PendingJobTTL before DispatchJob fails with a *StartError saying so.
const maxSlowStarts = 3

// sweep is the janitor's walk through the job records in search of jobs
// to recover (recoverJobs), kept between its passes: a pass walks for at
// most nodeConfig.recoverBudget, so that the walk of a pool of a million
// jobs (seconds of Redis time) is spread over passes instead of running
// past the pass's deadline, which used to cut it and start it over from
// the first record, never reaching the last ones.
type sweep struct {
	cursor string        // where the walk goes on; "" when none runs
	urgent bool          // a worker's death started the walk: its jobs wait for it
	again  bool          // a worker died while the walk ran: walk again after it
	took   time.Duration // the walk's time so far
	ended  time.Time     // when the last walk ended
	gap    time.Duration // the wait after it (nodeConfig.nextRecover)

	// What the walk is for and what it did, recorded as one Recovery
	// when it ends (done): the workers declared dead since the last walk
	// ended, and the jobs it recovered.
	dead []string
	jobs int64
	done []walked
}

// walked is what a walk that ended did, for its Recovery.
type walked struct {
	dead []string
	jobs int64
}

// recoverBudget is how long one janitor pass walks the records at most:
// half a tick (about 37,000 records at 250 ms) for stuck jobs; when a
// worker's death started the walk (its jobs are down until the walk
// finds them), two ticks (the ticks it overruns are skipped), within the
// janitor lease's four.
func (c nodeConfig) recoverBudget(urgent bool) time.Duration {
	if urgent {
		return 2 * c.janitorTick()
	}
	return c.janitorTick() / 2
}

// due reports whether a walk is to run now, starting one when a worker
// died (reaped) or the wait after the last one (s.gap, at least
// recoverEvery) is over.
func (s *sweep) due(reaped bool) bool {
	switch {
	case s.cursor != "":
		s.again = s.again || reaped
		s.urgent = s.urgent || reaped
	case reaped || s.ended.IsZero() || time.Since(s.ended) >= s.gap:
		s.cursor, s.took, s.urgent = "0", 0, reaped
	}
	return s.cursor != ""
}

// recoverJobs walks on through the job records (s) for recoverBudget at
// most (longer when a worker died), one HSCAN step at a time, and
// recovers the jobs of workers that are gone and the jobs stuck before
// Start for longer than PendingJobTTL: recoverScanScript finds them, this
// node chooses each one's new owner from its slot table, and
// recoverScript acts. The jobs it routed or queued again (those that
// recoverScript counts as recovered, even in a step that failed) add up
// in s.jobs, and a walk that ends is added to s.done, for its Recovery; a
// failed step is walked again next pass.
func (n *Node) recoverJobs(ctx context.Context, s *sweep) {
	counts := map[string]int64{} // this pass's outcomes
	began := time.Now()
	chunk, budget := int64(recoverChunk), n.cfg.recoverBudget(s.urgent)
	if step := n.test.recoverStep.Load(); step > 0 {
		chunk, budget = step, 0
	}
	for first := true; s.cursor != "" && (first || time.Since(began) < budget); first = false {
		res, err := n.run(ctx, recoverScanScript, "recover", n.lay.recordKeys(),
			n.cfg.pendingJobTTL.Milliseconds(), s.cursor, chunk)
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
			moved := counts["ROUTED"] + counts["REQUEUED"]
			err := n.recoverFound(ctx, found, counts)
			s.jobs += counts["ROUTED"] + counts["REQUEUED"] - moved
			if err != nil {
				n.logger.Warn("recover failed", slog.Any("error", err))
				break
			}
		}
		if next, _ := out[0].(string); next != "0" && next != "" {
			s.cursor = next
			continue
		}
		// The walk is over: the next one after a wait as long as it
		// took (recoverShare), or at once when a worker died meanwhile.
		s.took += time.Since(began)
		s.cursor, s.ended, s.gap = "", time.Now(), n.cfg.nextRecover(s.took)
		s.urgent = false
		if len(s.dead) > 0 || s.jobs > 0 {
			s.done = append(s.done, walked{dead: s.dead, jobs: s.jobs})
			n.logger.Info("jobs recovered", slog.Int("dead_workers", len(s.dead)), slog.Int64("jobs", s.jobs),
				slog.Duration("walk", s.took))
		}
		s.dead, s.jobs = nil, 0
		if s.again {
			s.cursor, s.again, s.took, s.urgent = "0", false, 0, true
			began = time.Now()
		}
	}
	if s.cursor != "" {
		s.took += time.Since(began)
	}
	if moved := counts["ROUTED"] + counts["REQUEUED"]; moved > 0 {
		n.metrics.add(ctx, n.metrics.requeued, moved)
	}
	if failed := counts["FAILED"]; failed > 0 {
		n.metrics.add(ctx, n.metrics.startFailures, failed)
		n.logger.Warn("dispatches failed: their Start did not return within PendingJobTTL",
			slog.Int64("jobs", failed), slog.Int("attempts", maxSlowStarts), slog.Duration("pending_job_ttl", n.cfg.pendingJobTTL))
	}
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
var recoverScanScript = newScript(prelude + `
local now = now_ms()
local step = redis.call("HSCAN", KEYS[1], ARGV[2], "COUNT", ARGV[3])
local all = step[2]
local out = {}
-- Whether each worker is registered, asked once a call: the records of a
-- pool at rest name a few workers many times over.
local live = {}
local function gone(w)
  if w == "" then return true end
  local l = live[w]
  if l == nil then l = redis.call("HEXISTS", KEYS[3], w) == 1; live[w] = l end
  return not l
end
for i = 1, #all, 2 do
  local raw = all[i + 1]
  -- Most records of a pool at rest are running jobs, stored compact
  -- ("u GEN NONCE WORKER ..." or, handed, "p ..."): only their worker
  -- matters (a running job is never stuck), read without decoding the
  -- record.
  local b = string.byte(raw, 1)
  local w = (b == 117 or b == 112) and compact_worker(raw)
  if not w or gone(w) then
    local key, r = all[i], decrec(raw)
    if r.s ~= S_QUEUED then
      local stuck = (r.s == S_ROUTED or r.s == S_CLAIMED) and now - r.t > tonumber(ARGV[1])
      if gone(r.w) or stuck then
        out[#out + 1] = {key, r.n, tostring(r.g), r.w, r.s, r.rd or "", r.sr or ""}
      end
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
var recoverScript = newScript(prelude + `
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
