package pool

import (
	"context"
	"log/slog"
	"strconv"
	"time"

	"github.com/redis/go-redis/v9"
)

// janitorTick is how often the janitor looks for dead workers: often
// enough that a dead worker's jobs restart well within WorkerTTL + 1s of
// its last keep-alive.
func (n *Node) janitorTick() time.Duration {
	return min(n.cfg.workerTTL/4, 250*time.Millisecond)
}

// janitorLoop runs on every full node; a lease lets one of them work at a
// time. Its scripts are fenced by generations, so two janitors at once
// (a lease lost while frozen) do no harm, only double work.
func (n *Node) janitorLoop() {
	tick := n.janitorTick()
	t := time.NewTicker(tick)
	defer t.Stop()
	lastRecover := time.Time{}
	for {
		select {
		case <-n.ctx.Done():
			return
		case <-t.C:
		}
		ctx, cancel := context.WithTimeout(n.ctx, 10*time.Second)
		n.metrics.tick(ctx, n)
		if n.holdLease(ctx, 4*tick) {
			reaped := n.reap(ctx)
			if reaped > 0 || time.Since(lastRecover) >= n.cfg.pendingJobTTL/4 {
				n.recoverJobs(ctx)
				lastRecover = time.Now()
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

// reap removes the workers whose keep-alive lapsed and returns how many.
func (n *Node) reap(ctx context.Context) int {
	res, err := n.run(ctx, reapScript, "reap", []string{n.lay.alive, n.lay.workers}, n.cfg.workerTTL.Milliseconds())
	if err != nil {
		n.logger.Warn("reap failed", slog.Any("error", err))
		return 0
	}
	dead, _ := res.([]any)
	t := n.table()
	for _, v := range dead {
		id, _ := v.(string)
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
	return len(dead)
}

// recoverJobs requeues the jobs of workers that are gone and the jobs stuck
// before Start for longer than PendingJobTTL.
func (n *Node) recoverJobs(ctx context.Context) {
	var requeued int64
	for cursor := "0"; ; {
		res, err := n.run(ctx, recoverScript, "recover",
			[]string{n.lay.jobs, n.lay.payloads, n.lay.workers, n.lay.jobStream},
			append(append([]any{n.cfg.pendingJobTTL.Milliseconds(), n.lay.nprefix}, fieldArgs...), cursor, recoverChunk)...)
		if err != nil {
			n.logger.Warn("recover failed", slog.Any("error", err))
			return
		}
		out, _ := res.([]any)
		if len(out) != 2 {
			n.logger.Warn("recover: unexpected reply", slog.Any("reply", res))
			return
		}
		c, _ := out[1].(int64)
		requeued += c
		if cursor, _ = out[0].(string); cursor == "0" || cursor == "" {
			break
		}
	}
	if requeued > 0 {
		n.metrics.add(ctx, n.metrics.requeued, requeued)
		n.logger.Info("jobs requeued", slog.Int64("count", requeued))
	}
}

// recoverChunk is how many job records one recover call looks at: about
// a millisecond of Redis time, so that a pool of 100,000 jobs does not
// stall every other client for a tenth of a second on each pass.
const recoverChunk = 500
