package queue

import (
	"context"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/shepherd-go/shepherd/internal/member"
	"github.com/shepherd-go/shepherd/internal/script"
)

// reapEvery is how often the reaping process looks for processes whose
// lease ran out: min(TTL/4, 250ms), so a dead process's tasks are back
// within about TTL + 250ms.
func (q *Queue) reapEvery() time.Duration { return min(q.cfg.ttl/4, 250*time.Millisecond) }

// reapLoop runs reapScript every reapEvery while this process holds the
// janitor lease (member.Lease, as the pool's janitor: one process reaps
// at a time, and another takes over within 4 reapEvery of its death): it
// declares dead the processes whose lease ran out and gives their tasks
// in flight back. The script is atomic, so two reapers at once (a
// holder frozen past its lease) do no harm.
//
// Each shard is reaped by a loop of its own, so that a shard that does
// not answer does not delay the others.
func (q *Queue) reapLoop() {
	all := q.known()
	if len(all) == 1 {
		q.reapShardLoop(all[0])
		return
	}
	var wg sync.WaitGroup
	for _, l := range all {
		wg.Add(1)
		go func() {
			defer wg.Done()
			q.reapShardLoop(l)
		}()
	}
	wg.Wait()
}

// reapShardLoop reaps shard l every reapEvery while the process holds
// the shard's janitor lease.
func (q *Queue) reapShardLoop(l layout) {
	ctx := q.tasks.Context()
	t := time.NewTicker(q.reapEvery())
	defer t.Stop()
	lease := member.NewLease(q.rdb, l.janitor, q.proc)
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		q.reapShard(ctx, l, lease)
	}
}

// reapShard reaps one shard, if this process holds its janitor lease
// (the home shard's also makes it the one that samples the depth).
func (q *Queue) reapShard(ctx context.Context, l layout, lease *member.Lease) {
	cctx, cancel := context.WithTimeout(ctx, loopCallTimeout)
	defer cancel()
	held, err := lease.Hold(cctx, 4*q.reapEvery())
	if l.shard == 0 {
		q.janitor.Store(err == nil && held)
	}
	var res any
	if err == nil && held {
		res, err = script.Run(cctx, q.rdb, reapScript, "queue: reap", l.common(), l.commonArgs(16)...)
	}
	if err != nil {
		if ctx.Err() == nil {
			q.logger.Warn("looking for dead processes failed", "error", err, "shard", l.shard)
		}
		return
	}
	out, _ := res.([]any)
	if len(out) == 4 && out[0] != int64(0) {
		q.logger.Warn("declared processes dead; their tasks in flight go to others",
			"processes", out[0], "requeued", out[1], "finished", out[2], "shard", l.shard)
		if l.shard == 0 { // a process is declared dead in every shard: counted once
			q.m.procsDead.Add(ctx, out[0].(int64), q.m.attrs)
		}
		q.m.requeued.Add(ctx, out[1].(int64), q.m.attrs)
	}
	if len(out) == 4 && out[3] != int64(0) {
		q.droppedDead(ctx, out[3].(int64))
	}
}

// reapScript declares dead up to ARGV[4] processes whose lease ran out,
// and gives their tasks in flight back: each such attempt counts as
// failed ("stopped answering"), so a task that kills its process every
// time ends as a dead letter after its max attempts. A drain request
// of a process declared dead is kept: if the process comes back, it
// still drains (drainScript drops the requests of processes gone).
//
//	ARGV[4] limit
//
// Returns {processes declared dead, tasks requeued, tasks finished,
// dead letters dropped}.
var reapScript = redis.NewScript(prelude + finishFn + `
local t = now()
local procs = {}
local ttl = redis.call('HGET', K_SETTINGS, '` + settingTTL + `')
local all = ttl and redis.call('HGETALL', K_ALIVE) or {} -- no TTL: nothing to judge by
for i = 1, #all, 2 do
  if #procs >= tonumber(ARGV[4]) then break end
  if lapsed(all[i + 1], t, ttl) then procs[#procs + 1] = all[i] end
end
local requeued, finished, dropped = 0, 0, 0
for _, p in ipairs(procs) do
  local ik = P_INFLIGHT .. p
  for _, id in ipairs(redis.call('SMEMBERS', ik)) do
    local tk = P_TASK .. id
    local q, att, began, sub, ret, b, ten = inFlight(id)
    if q == p then
      redis.call('HDEL', K_ACTIVE, id)
      local r = rec(id) or {}
      local cx, max = r[F_CANCEL], r[F_MAX_ATTEMPTS]
      local errs = adderr(id, tonumber(att), 'process ' .. p .. ' stopped answering (died, paused or cut off) during the attempt', t)
      if cx == '1' then
        dropped = dropped + finish(tk, id, 'cancelled', t, sub, ret, att, errs, nil, ten, b, began)
        finished = finished + 1
      elseif tonumber(att) >= tonumber(max or '` + defaultMaxField + `') then
        dropped = dropped + finish(tk, id, 'dead', t, sub, ret, att, errs, nil, ten, b, began)
        finished = finished + 1
      else
        if began then recSet(id, 'att', att) else recSet(id, 'own', nil) end
        readyAgain(ten, id)
        requeued = requeued + 1
      end
      unload(ten, 1)
    end
  end
  redis.call('DEL', ik)
  redis.call('HDEL', K_ALIVE, p)
  redis.call('HDEL', K_PROCS, p)
  redis.call('SREM', K_IDLE, p)
end
if #procs > 0 then releaseHolds(procs) end
flush()
if requeued > 0 then wake() end
return {#procs, requeued, finished, dropped}
`)
