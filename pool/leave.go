package pool

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strconv"
)

// RemoveWorker stops worker w and removes it from the pool: no new job is
// routed to it, its jobs are stopped here (bounded by WorkerShutdownTTL)
// and started on the other workers; only its own keys move. It returns
// ErrInvalidOption for a worker of another node, and nil for a worker
// already removed.
func (n *Node) RemoveWorker(ctx context.Context, w *Worker) error {
	if w == nil || w.node != n {
		return fmt.Errorf("%w: not a worker of this node", ErrInvalidOption)
	}
	n.mu.Lock()
	_, mine := n.myWorkers[w.id]
	delete(n.myWorkers, w.id)
	n.mu.Unlock()
	if !mine {
		return nil
	}
	return w.leave(ctx, true)
}

// leave stops the worker's loop and removes it from the pool. With
// handOver its jobs are released to the other workers; without (pool
// shutdown) they are only stopped.
func (w *Worker) leave(ctx context.Context, handOver bool) error {
	n := w.node
	w.stopOnce.Do(func() { close(w.stopReq) })
	<-w.done
	var errs []error
	// Leave the table first, so that routers stop sending jobs here.
	if w.slot >= 0 {
		if _, err := n.slots.TestAndDelete(ctx, strconv.Itoa(w.slot), w.id); err != nil {
			errs = append(errs, err)
		}
	}
	stopCtx, cancel := context.WithTimeout(ctx, n.cfg.workerShutdownTTL)
	if handOver {
		w.handOverAll(stopCtx) // leaves w.jobs empty
	}
	for key := range w.jobs {
		if handOver {
			w.moveCtx(stopCtx, key)
		} else {
			_ = w.callStop(stopCtx, key)
			delete(w.jobs, key)
		}
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
	if _, err := n.workers.Delete(ctx, w.id); err != nil {
		errs = append(errs, err)
	}
	w.cleanup(ctx)
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
