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

// janitorTick is how often the janitor looks for dead workers and nodes:
// often enough that a dead worker's jobs restart well within WorkerTTL +
// 1s of its last keep-alive.
func (n *Node) janitorTick() time.Duration {
	return min(n.cfg.workerTTL/4, 250*time.Millisecond)
}

// janitorTimeout bounds one janitor pass.
const janitorTimeout = 10 * time.Second

// maxSlowStarts is how many times a DispatchJob's Start may overrun
// PendingJobTTL before DispatchJob fails with a *StartError saying so.
const maxSlowStarts = 3

// withdrawnTTL is how long the pool remembers a withdrawn DispatchJob: an
// admission that reaches Redis later than that (held up in a frozen
// Redis's or a slow network's buffers for ten minutes) would run.
const withdrawnTTL = 10 * time.Minute

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
		ctx, cancel := context.WithTimeout(n.ctx, janitorTimeout)
		n.metrics.tick(ctx, n)
		if n.holdLease(ctx, 4*tick) {
			// The routers' consumers first: one created after this read
			// belongs to a node registered before nodes() reads.
			consumers, cerr := n.sink.Consumers(ctx)
			reaped := n.reap(ctx)
			live, dead, nerr := n.nodes(ctx)
			// Jobs belong to workers: a dead node's workers are reaped
			// with it, and its router's events are taken over below.
			if reaped > 0 || time.Since(lastRecover) >= n.cfg.pendingJobTTL/4 {
				n.recoverJobs(ctx)
				n.pruneWithdrawn(ctx)
				lastRecover = time.Now()
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
// one's new owner from its slot table, and recoverScript acts.
func (n *Node) recoverJobs(ctx context.Context) {
	counts := map[string]int64{}
	for cursor := "0"; ; {
		res, err := n.run(ctx, recoverScanScript, "recover", n.lay.recordKeys(),
			n.cfg.pendingJobTTL.Milliseconds(), cursor, recoverChunk)
		if err != nil {
			n.logger.Warn("recover failed", slog.Any("error", err))
			return
		}
		out, _ := res.([]any)
		if len(out) != 2 {
			n.logger.Warn("recover: unexpected reply", slog.Any("reply", res))
			return
		}
		if found, _ := out[1].([]any); len(found) > 0 {
			if err := n.recoverFound(ctx, found, counts); err != nil {
				n.logger.Warn("recover failed", slog.Any("error", err))
				return
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
}

// recoverFound runs recoverScript for the jobs recoverScanScript found,
// and adds its outcomes to counts.
func (n *Node) recoverFound(ctx context.Context, found []any, counts map[string]int64) error {
	t := n.table()
	sk := newScriptKeys(n.lay.jobs, n.lay.payloads, n.lay.jobStream, n.lay.workers, n.lay.slotsRev)
	args := []any{n.cfg.pendingJobTTL.Milliseconds(), strconv.FormatInt(t.rev, 10), maxSlowStarts,
		fmt.Sprintf("Start did not return within PendingJobTTL (%v) on %d attempts", n.cfg.pendingJobTTL, maxSlowStarts)}
	stream := func(prefix, id string) int {
		if id == "" || id == noReply {
			return 0
		}
		return sk.add(prefix + id)
	}
	for _, v := range found {
		f, _ := v.([]any)
		if len(f) != 6 {
			return fmt.Errorf("pool: recover: malformed entry %v", v)
		}
		str := func(i int) string { s, _ := f[i].(string); return s }
		key := str(0)
		owner := t.owner(key)
		args = append(args, key, str(1), str(2), str(3), owner,
			stream(n.lay.wprefix, owner), stream(n.lay.nprefix, str(4)), stream(n.lay.nprefix, str(5)))
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

// pruneWithdrawn forgets withdrawn dispatches older than withdrawnTTL.
func (n *Node) pruneWithdrawn(ctx context.Context) {
	if _, err := n.run(ctx, pruneWithdrawnScript, "prune withdrawn", []string{n.lay.withdrawn}, withdrawnTTL.Milliseconds()); err != nil {
		n.logger.Warn("pruning withdrawn dispatches failed", slog.Any("error", err))
	}
}
