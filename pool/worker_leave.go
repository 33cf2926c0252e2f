package pool

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strconv"

	"github.com/redis/go-redis/v9"
)

// RemoveWorker stops worker w and removes it from the pool: no new job is
// routed to it, its jobs are stopped here (bounded by WorkerShutdownTTL)
// and started on the other workers; only its own keys move. On a node
// with WithNodeID too: the worker leaves for good, and the node's next
// AddWorker takes its id again. It returns
// ErrUnknownWorker for a nil worker or one of another node, and nil for a worker
// already removed.
func (n *Node) RemoveWorker(ctx context.Context, w *Worker) error {
	if w == nil || w.node != n {
		return ErrUnknownWorker
	}
	if !n.dropWorker(w) {
		return nil
	}
	defer n.freeIndex(w.index)
	return n.eachPart(func(p *Node) error {
		if p == n {
			return w.leave(ctx, true)
		}
		return p.removeWorker(ctx, w.parts[p.shard])
	})
}

// removeWorker is RemoveWorker of one shard's worker, on the node's part
// in that shard; it does nothing for a worker already removed.
func (n *Node) removeWorker(ctx context.Context, w *Worker) error {
	if !n.dropWorker(w) {
		return nil
	}
	return w.leave(ctx, true)
}

// dropWorker takes w off the node's workers, and says whether it was
// there (a removal's first step: the one that finds it leaves it).
func (n *Node) dropWorker(w *Worker) bool {
	n.mu.Lock()
	defer n.mu.Unlock()
	_, mine := n.myWorkers[w.id]
	delete(n.myWorkers, w.id)
	return mine
}

// leave stops the worker's loop and removes it from the pool. With
// handOver its jobs are released to the other workers; without (pool
// shutdown) they are only stopped.
func (w *Worker) leave(ctx context.Context, handOver bool) error {
	return w.depart(ctx, handOver, w.quit(ctx))
}

// quit is the first half of leave: stop the worker's loop and leave the
// slot table, so that no job is routed here any more. A closing node quits
// all its workers before any hands over its jobs, so that none hands a job
// to another that is leaving too.
func (w *Worker) quit(ctx context.Context) error {
	n := w.node
	w.stopOnce.Do(func() { close(w.stopReq) })
	<-w.done
	if w.slot >= 0 && w.ours() {
		if _, err := n.slots.TestAndDelete(ctx, strconv.Itoa(w.slot), w.id); err != nil {
			return err
		}
	}
	return nil
}

// depart is the second half of leave, after quit (whose error it adds to
// its own): stop the worker's jobs, handing them over or not, and remove
// it from the pool.
func (w *Worker) depart(ctx context.Context, handOver bool, quitErr error) error {
	n := w.node
	errs := []error{quitErr}
	stopCtx, cancel := context.WithTimeout(ctx, n.cfg.stopTimeout())
	if handOver {
		w.handOverAll(stopCtx) // leaves w.jobs empty
	}
	for key, h := range w.jobs {
		_ = w.stopRun(stopCtx, key, h.gen)
		delete(w.jobs, key)
	}
	cancel()
	if err := n.inbox.Remove(ctx, w.stream); err != nil {
		errs = append(errs, err)
	}
	n.inboxMu.Lock()
	delete(n.inboxes, w.stream.Name())
	n.inboxMu.Unlock()
	// Jobs routed here but not started yet are requeued by the janitor
	// once the worker is out of the workers map.
	if w.ours() {
		if _, err := n.workers.Delete(ctx, w.id); err != nil {
			errs = append(errs, err)
		}
		w.cleanup(ctx)
	}
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("pool: remove worker %s: %w", w.id, err)
	}
	return nil
}

// cleanup deletes the worker's keep-alive and stream.
func (w *Worker) cleanup(ctx context.Context) {
	n := w.node
	if _, err := n.run(ctx, cleanupScript, "cleanup", []string{n.lay.alive, w.stream.Key()}, w.id); err != nil {
		w.logger.Warn("cleanup failed", slog.Any("error", err))
	}
}

// cleanupScript deletes a removed worker's keep-alive (and restart mark,
// identity.go, and report, report.go) and stream.
//
//	KEYS[1] alive, KEYS[2] the worker's stream
//	ARGV[1] worker id
var cleanupScript = redis.NewScript(`
redis.call("HDEL", KEYS[1], "w:" .. ARGV[1], "r:" .. ARGV[1], "j:" .. ARGV[1])
redis.call("DEL", KEYS[2])
return 1
`)
