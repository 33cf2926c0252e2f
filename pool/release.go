package pool

import (
	"context"
	"log/slog"
	"strconv"
	"time"
)

// release gives a job that this worker just stopped back to the pool. It
// retries while Redis fails, because nothing else would: the record still
// says the job runs here, and the janitor requeues only the jobs of workers
// that are gone. It gives up when ctx ends or the worker or node is
// leaving (leaving removes the worker, after which the janitor requeues
// the job).
func (w *Worker) release(ctx context.Context, key string, h header) error {
	n := w.node
	backoff := 50 * time.Millisecond
	for {
		keys, args := w.releaseCall(n.table(), key, h.gen)
		res, err := n.run(ctx, releaseScript, "release", keys, args...)
		if err == nil {
			if res == "ROUTED" {
				n.releasesRouted.Add(1)
			}
			return nil
		}
		w.logger.Warn("release failed; retrying", slog.String("key", key), slog.Any("error", err), slog.Duration("retry_in", backoff))
		select {
		case <-ctx.Done():
			return err
		case <-w.stopReq:
			return err
		case <-n.ctx.Done():
			return err
		case <-time.After(backoff):
		}
		backoff = min(2*backoff, time.Second)
	}
}

// releaseCall returns releaseScript's KEYS and ARGV for giving back the job
// key of generation gen, handing it to its owner under t when there is one.
func (w *Worker) releaseCall(t table, key string, gen int64) ([]string, []any) {
	n := w.node
	owner := t.owner(key)
	stream := n.lay.jobStream // a key of the pool; unused when no owner was chosen
	if owner == w.id {
		owner = "" // our own table still names us: let a router decide
	}
	if owner != "" {
		stream = n.lay.wprefix + owner
	}
	return []string{n.lay.jobs, n.lay.payloads, n.lay.jobStream, n.lay.workers, n.lay.slotsRev, stream},
		append(append([]any{key, gen, w.id}, fieldArgs...), owner, strconv.FormatInt(t.rev, 10), n.lay.nprefix)
}
