package pool

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"slices"

	"github.com/shepherd-go/shepherd/internal/group"
	"github.com/shepherd-go/shepherd/rmap"
)

// Close takes the node out of the pool. Its workers leave as with
// RemoveWorker: their jobs are stopped here (bounded by WorkerShutdownTTL)
// and start on the other workers; if this was the last node with workers,
// the jobs wait in the pool for the next worker. A node with WithNodeID
// keeps its place instead, for a restart: its jobs are stopped here and
// wait, routed to its workers still, until a node with the same id comes
// back (and starts them again) or the restart grace passes (and they move
// to the other workers); Leave takes it out for good. Calls waiting on
// the node return ErrNodeClosed. Close works on every kind of node and is
// idempotent: later calls return the first call's result at once.
func (n *Node) Close(ctx context.Context) error {
	err := n.stop(ctx, true)
	n.waitWatchers()
	return err
}

// stop closes the node, its parts in every shard at once; with handOver
// its workers' jobs move to other workers, without (shutdown) they are
// only stopped.
func (n *Node) stop(ctx context.Context, handOver bool) error {
	if r := n.root(); r != n {
		return r.stop(ctx, handOver)
	}
	return n.eachPart(func(p *Node) error { return p.stopPart(ctx, handOver) })
}

// waitWatchers waits for the shutdown watchers of the node's parts.
func (n *Node) waitWatchers() {
	for _, p := range n.partsOrSelf() {
		p.watchers.Wait()
	}
}

// partsOrSelf returns the node's parts, or the node alone on a pool of
// one shard.
func (n *Node) partsOrSelf() []*Node {
	if len(n.parts) < 2 {
		return []*Node{n}
	}
	return n.parts
}

// stopPart closes the node's part in one shard (stop).
func (n *Node) stopPart(ctx context.Context, handOver bool) error {
	n.closeOnce.Do(func() {
		n.mu.Lock()
		n.closed = true
		if !handOver {
			n.shutDown = true
		}
		// A node with a stable identity parks its workers for a restart,
		// unless it leaves for good (identity.go).
		leaving := n.leaving
		restart := handOver && n.cfg.identity != "" && !leaving
		workers := slices.Collect(maps.Values(n.myWorkers))
		n.myWorkers = make(map[string]*Worker)
		n.mu.Unlock()
		close(n.closedChan)

		var errs []error
		// Stop routing first: our unacknowledged job events go back to the
		// other routers after the ack grace period.
		if n.sink != nil {
			if err := n.sink.Close(ctx); err != nil {
				errs = append(errs, err)
			}
		}
		// The workers leave at once: each stops its own jobs, and their
		// releases overlap instead of queueing behind one another. All of
		// them leave the slot table first, so that none hands a job to
		// another one that is leaving too.
		quitErrs := make([]error, len(workers))
		leaveErrs := make([]error, len(workers))
		if restart {
			each(workers, func(i int, w *Worker) { leaveErrs[i] = w.park(ctx) })
		} else {
			each(workers, func(i int, w *Worker) { quitErrs[i] = w.quit(ctx) })
			each(workers, func(i int, w *Worker) { leaveErrs[i] = w.depart(ctx, handOver, quitErrs[i]) })
			if leaving {
				leaveErrs = append(leaveErrs, n.releaseIdentity(ctx))
			}
		}
		errs = append(errs, leaveErrs...)
		n.loops.Stop()
		n.loops.Wait()
		if err := n.awaitStops(ctx); err != nil {
			errs = append(errs, err)
		}
		if err := n.awaitWithdrawals(ctx); err != nil {
			errs = append(errs, err)
		}
		n.teardown(ctx)
		n.closeErr = errors.Join(errs...)
		if n.closeErr != nil {
			n.closeErr = fmt.Errorf("pool: close node %s: %w", n.id, n.closeErr)
		}
		// Done only now: a process that exits on Done must not cut its
		// Stop handlers short (closedChan, closed first, wakes waiters);
		// and only once every shard's part is done (stop stops them all).
		for _, p := range n.partsOrSelf()[1:] {
			<-p.doneChan
		}
		close(n.doneChan)
	})
	return n.closeErr
}

// teardown closes the node's readers and maps and deletes its keep-alive,
// record and stream. It is safe on a partly built node.
func (n *Node) teardown(ctx context.Context) {
	n.loops.Stop()
	n.background.Stop()
	n.stops.Stop()
	n.metrics.close()
	if n.replies != nil {
		_ = n.replies.Close(ctx)
	}
	if n.sink != nil {
		_ = n.sink.Close(ctx)
	}
	if n.inbox != nil {
		_ = n.inbox.Close(ctx)
	}
	if n.nodeStream != nil {
		if err := n.rdb.Del(ctx, n.nodeStream.Key()).Err(); err != nil {
			n.logger.Warn("deleting the node stream", slog.Any("error", err))
		}
	}
	// The record first: a record without a keep-alive reads as a dead node.
	if err := n.rdb.HDel(ctx, n.lay.nodes, n.id).Err(); err != nil {
		n.logger.Warn("deleting the node record", slog.Any("error", err))
	}
	if err := n.rdb.HDel(ctx, n.lay.alive, "n:"+n.id).Err(); err != nil {
		n.logger.Warn("deleting the node keep-alive", slog.Any("error", err))
	}
	for _, m := range []*rmap.Map{n.workers, n.slots, n.shutdown} {
		if m != nil {
			_ = m.Close()
		}
	}
}

// awaitWithdrawals waits for the withdrawals of failed dispatches to
// settle (they retry until Redis answers), or until ctx ends: then they
// are abandoned, and their jobs may run.
func (n *Node) awaitWithdrawals(ctx context.Context) error {
	n.background.Close()
	err := n.background.WaitContext(ctx)
	n.background.Stop()
	if err != nil {
		n.background.Wait()
		return fmt.Errorf("withdrawals of failed dispatches abandoned, their jobs may run: %w", err)
	}
	return nil
}

// awaitStops waits for the Stop handlers that outlived their deadline,
// for up to WorkerShutdownTTL more or until ctx ends, and reports those
// still running: they are abandoned.
func (n *Node) awaitStops(ctx context.Context) error {
	n.stops.Close()
	wctx, cancel := context.WithTimeout(ctx, n.cfg.stopTimeout())
	defer cancel()
	if err := n.stops.WaitContext(wctx); err != nil {
		n.logger.Error("Stop handlers still run after WorkerShutdownTTL; they are abandoned", slog.Any("error", err))
		return fmt.Errorf("stop handlers still run after WorkerShutdownTTL: %w", err)
	}
	return nil
}

// each runs f for every item (a worker, a shard's part) on its own
// goroutine and waits for all.
func each[T any](items []T, f func(i int, v T)) {
	g := group.New(context.Background())
	for i, v := range items {
		g.Go(func() { f(i, v) })
	}
	g.Close()
	g.Wait()
}
