package pool

import (
	"context"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
)

// runs fences a node's Start and Stop calls by job run. A run is one
// successful Start of a key by one worker in one generation of the job.
// The node allows one handler call of a key at a time, across all its
// workers, and remembers which run of each key it has not stopped yet:
//
//   - a Stop names its run (worker and generation) and is skipped when
//     that run was stopped already;
//   - a Start first stops a run of its key that the node still has.
//
// Why: users usually give every worker of a process one handler, keyed by
// job key, so Stop(key) stops whatever run of key it started. A worker
// that was declared dead (its process froze) stops its stale copies when
// it thaws; meanwhile another worker of the same process may have
// rejoined and been handed the same key back. Stopping by key would then
// stop the fresh run, while the pool records it as running on a healthy
// worker: nothing would ever restart it. With the
// fence, whichever comes first stops the stale run, and the fresh Start
// follows it.
type runs struct {
	mu   sync.Mutex
	keys map[string]*run // only keys with a run or a call in progress
}

// run is one key's state on the node. owner and gen change only while
// the key is held.
type run struct {
	busy  chan struct{} // non-nil while the key is held; closed on release
	owner *Worker       // whose Start succeeded last and was not stopped since; nil for none
	gen   int64         // the job's generation that Start ran in
}

// hold waits until no other handler call of key runs on the node, and
// holds the key for the caller, who must release it.
func (rs *runs) hold(ctx context.Context, key string) (*run, error) {
	rs.mu.Lock()
	for {
		if rs.keys == nil {
			rs.keys = make(map[string]*run)
		}
		r := rs.keys[key]
		if r == nil {
			r = &run{}
			rs.keys[key] = r
		}
		if r.busy == nil {
			r.busy = make(chan struct{})
			rs.mu.Unlock()
			return r, nil
		}
		busy := r.busy
		rs.mu.Unlock()
		select {
		case <-busy:
		case <-ctx.Done():
			return nil, ctx.Err()
		}
		rs.mu.Lock()
	}
}

// release ends a hold of key.
func (rs *runs) release(key string, r *run) {
	rs.mu.Lock()
	defer rs.mu.Unlock()
	close(r.busy)
	r.busy = nil
	if r.owner == nil && rs.keys[key] == r {
		delete(rs.keys, key)
	}
}

// stopHeld runs the Stop handler of r's run of key, with the handler of
// the worker that started it; the caller holds the key. When Stop
// returns in time it reports true and Stop's error: the key is still
// held, with no run. When ctx ends first, a handler that ignores its ctx
// is left running (in the node's stops group, which Close waits for up to
// WorkerShutdownTTL more) and stopHeld reports false: the key stays held
// until the handler returns, so that no Start of it runs meanwhile, and
// the caller must not release it.
func (n *Node) stopHeld(ctx context.Context, key string, r *run) (held bool, err error) {
	w := r.owner
	const (
		running = iota
		returned
		abandoned
	)
	var state atomic.Int32
	done := make(chan error, 1)
	call := func() {
		err := safely(w.logger, "Stop", key, func() error { return w.handler.Stop(ctx, key) })
		if state.CompareAndSwap(running, returned) {
			done <- err
			return
		}
		r.owner = nil // the caller gave up: the run ends now
		n.runs.release(key, r)
	}
	if !n.stops.Go(call) {
		call() // the node has stopped: nobody is left to wait for
	}
	select {
	case err = <-done:
	case <-ctx.Done():
		if !state.CompareAndSwap(running, abandoned) {
			err = <-done // it returned just now
			break
		}
		return false, fmt.Errorf("pool: Stop of %q did not return in time: %w", key, ctx.Err())
	}
	r.owner = nil
	return true, err
}

// stopRun stops the run of key that this worker started in generation
// gen, waiting no longer than ctx allows (see stopHeld). It calls no
// handler when that run was stopped already: another worker of this node
// started the key since, after stopping it (this worker had been declared
// dead). Every Stop of a job goes through here.
func (w *Worker) stopRun(ctx context.Context, key string, gen int64) error {
	n := w.node
	r, err := n.runs.hold(ctx, key)
	if err != nil {
		err = fmt.Errorf("pool: Stop of %q waited for another call of its handlers: %w", key, err)
		w.logger.Warn("stop failed", slog.String("key", key), slog.Any("error", err))
		return err
	}
	if r.owner != w || r.gen != gen {
		n.runs.release(key, r)
		w.logger.Debug("stale run already stopped", slog.String("key", key), slog.Int64("generation", gen))
		return nil
	}
	held, err := n.stopHeld(ctx, key, r)
	if held {
		n.runs.release(key, r)
	}
	if err != nil {
		w.logger.Warn("stop failed", slog.String("key", key), slog.Any("error", err))
	}
	return err
}

// startRun runs this worker's Start of job in generation gen, holding the
// key: once every other call of its handlers on the node has returned,
// and after stopping a run of the key that the node still has (a stale
// copy of a worker declared dead, which has not stopped it yet). It
// records the run when Start succeeds.
func (w *Worker) startRun(ctx context.Context, job *Job, gen int64) error {
	n := w.node
	r, err := n.runs.hold(ctx, job.Key)
	if err != nil {
		return fmt.Errorf("a Stop of the key on this node did not return in time: %w", err)
	}
	if r.owner != nil {
		w.logger.Warn("stopping a stale run of the key on this node before starting it",
			slog.String("key", job.Key), slog.String("stale_worker", r.owner.id), slog.Int64("stale_generation", r.gen))
		w.node.test.staleRunsStopped.Add(1)
		held, stopErr := n.stopHeld(ctx, job.Key, r)
		if !held {
			return fmt.Errorf("the Stop of the key's previous run on this node did not return in time: %w", stopErr)
		}
		if stopErr != nil {
			w.logger.Warn("stop failed", slog.String("key", job.Key), slog.Any("error", stopErr))
		}
	}
	err = safely(w.logger, "Start", job.Key, func() error { return w.handler.Start(ctx, job) })
	if err == nil {
		r.owner, r.gen = w, gen
	}
	n.runs.release(job.Key, r)
	return err
}
