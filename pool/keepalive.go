package pool

import (
	"context"
	"errors"
	"log/slog"
	"maps"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/shepherd-go/shepherd/internal/member"
)

// keepAliveLoop keeps the node and its workers alive every WorkerTTL/3
// (member.KeepAlive).
func (n *Node) keepAliveLoop() {
	member.KeepAlive(n.ctx, n.cfg.keepAliveEvery(), nil, func(ctx context.Context) bool {
		if n.test.keepAlivePaused.Load() {
			return true
		}
		ctx, cancel := context.WithTimeout(ctx, n.cfg.keepAliveEvery())
		defer cancel()
		if _, err := n.keepAlive(ctx); err != nil && n.ctx.Err() == nil {
			n.logger.Warn("keep-alive failed; trying again shortly", slog.Any("error", err))
			return false
		}
		n.checkWaits(ctx)
		return true
	})
}

// reportWait is how long a keep-alive waits for fresh reports.
func (n *Node) reportWait() time.Duration {
	if d := n.test.reportWait.Load(); d > 0 {
		return time.Duration(d)
	}
	return n.cfg.reportWait()
}

// freshReports asks each worker's loop for its report and waits until
// they published them, up to within or ctx; it says which did.
func freshReports(ctx context.Context, workers map[string]*Worker, within time.Duration) map[string]bool {
	asked := make(map[string]<-chan struct{}, len(workers))
	for id, w := range workers {
		asked[id] = w.askReport()
	}
	wait := time.NewTimer(within)
	defer wait.Stop()
	expired := false
	fresh := make(map[string]bool, len(workers))
	for id, published := range asked {
		if published == nil {
			fresh[id] = false
			continue
		}
		if !expired {
			select {
			case <-published:
			case <-wait.C:
				expired = true
			case <-ctx.Done():
				expired = true
			}
		}
		select {
		case <-published:
			fresh[id] = true
		default: // the time is up: the last report goes
			fresh[id] = false
		}
	}
	return fresh
}

// keepAlive records the node's and its workers' keep-alives and tells the
// workers that were declared dead. It returns whether the pool shuts down.
// When the pool had declared this node dead (it was paused or cut off for
// longer than WorkerTTL) or Redis lost the pool's state, answers to the
// node's calls may have been lost: the calls still waiting look at the
// job records instead (resync).
func (n *Node) keepAlive(ctx context.Context) (bool, error) {
	n.mu.Lock()
	workers := make(map[string]*Worker, len(n.myWorkers))
	maps.Copy(workers, n.myWorkers)
	n.mu.Unlock()
	args := []any{n.id}
	for id, fresh := range freshReports(ctx, workers, n.reportWait()) {
		args = append(args, id, workers[id].reportJSON(fresh))
	}
	res, err := n.run(ctx, keepAliveScript, "keep alive",
		[]string{n.lay.alive, n.lay.workers, n.lay.shutdown, n.nodeStream.Key(), n.lay.settings}, args...)
	if err != nil {
		return false, err
	}
	out, _ := res.([]any)
	if len(out) < 3 {
		return false, errors.New("pool: keep alive: short reply")
	}
	dead := make(map[string]bool, len(out)-3)
	for _, v := range out[3:] {
		id, _ := v.(string)
		dead[id] = true
		n.mu.Lock()
		w := n.myWorkers[id]
		n.mu.Unlock()
		if w != nil {
			w.declaredDead()
		}
	}
	// The workers kept alive learn Redis's clock and their keep-alive,
	// which let them start the jobs handed to them and answer their
	// dispatchers by themselves (worker_claim.go).
	if now, ok := out[2].(int64); ok {
		at := time.Now()
		for id, w := range workers {
			if !dead[id] {
				w.setClock(at, now, now)
			}
		}
	}
	st, err := member.ParseStanding(out[1])
	if err != nil {
		return false, err
	}
	switch st {
	case member.Revived:
		n.logger.Warn("this node was declared dead (no keep-alive for longer than WorkerTTL: paused or cut off); it rejoins, and its waiting calls check their jobs")
		n.metrics.add(ctx, n.metrics.revived, 1)
	case member.Lost:
		n.logger.Error("pool state lost (Redis restarted empty): every job, worker and setting of the pool is gone; this node rejoins")
		n.metrics.add(ctx, n.metrics.stateLost, 1)
	}
	// A node that is stopping does not register again: after a Shutdown
	// deleted the pool, that would bring some of its keys back.
	if st != member.OK && n.errClosed() == nil {
		// Register again (the record went with the keep-alive) and, if
		// Redis lost them, store the pool's settings again.
		if err := n.settle(ctx, true); err != nil {
			n.logger.Error("rejoining the pool", slog.Any("error", err))
		}
		if st == member.Lost && n.home == nil {
			n.restoreShards(ctx)
		}
		n.resync(ctx, st == member.Lost)
	}
	return out[0] == "1", nil
}

// keepAliveScript records keep-alives of a node and its workers, with
// Redis's clock, and recreates the node's stream if Redis lost it (or the
// janitor removed it), so that replies reach the node again.
//
//	KEYS[1] alive, KEYS[2] workers map, KEYS[3] shutdown map, KEYS[4] the
//	node's stream, KEYS[5] the pool's settings
//	ARGV[1] node id, then per worker: its id, its report (report.go)
//
// A worker's report is stored beside its keep-alive. A worker missing
// from the workers map was declared dead: it gets no keep-alive (nor
// report), and is returned so its node stops its stale jobs; so is a
// worker whose entry another node wrote (its stable id was taken over by
// a restarted process, identity.go). Returns
// {shutdown flag set ("1"/"0"), the node's standing, Redis's clock (ms),
// dead worker ids...}
// where the standing is "ok", "revived" (its keep-alive was gone: the
// pool declared the node dead, and replies to it may have been lost) or
// "lost" (the pool's settings were gone too: Redis lost the pool's state).
var keepAliveScript = redis.NewScript(member.Lua + workerLua + `
local now = now_ms()
local out = {redis.call("HEXISTS", KEYS[3], "shutdown") == 1 and "1" or "0",
  standing(KEYS[1], "n:" .. ARGV[1], KEYS[5], now), now}
if redis.call("EXISTS", KEYS[4]) == 0 then
  local id = redis.call("XADD", KEYS[4], "*", "init", "1")
  redis.call("XDEL", KEYS[4], id)
end
for i = 2, #ARGV, 2 do
  if worker_of(KEYS[2], ARGV[i], ARGV[1]) then
    seen(KEYS[1], "w:" .. ARGV[i], now)
    redis.call("HSET", KEYS[1], "j:" .. ARGV[i], ARGV[i + 1])
  else
    out[#out + 1] = ARGV[i]
  end
end
return out
`)
