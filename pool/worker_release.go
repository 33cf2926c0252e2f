package pool

import (
	"context"
	"log/slog"
)

// handOverAll stops every job of the worker and gives each back to the
// pool, as move does, but in batches: the Stop handlers of a batch run
// first, one by one, then one releaseScript call releases the batch.
// A worker with thousands of jobs thus leaves in a few round trips rather
// than one per job, and each job is still stopped here before it goes to
// another worker. When the batch call fails (an error, Redis restarting),
// its jobs are released one by one; a release that fails then too is left
// to the janitor, which requeues the job once this worker is gone.
func (w *Worker) handOverAll(ctx context.Context) {
	n := w.node
	keys := make([]string, 0, len(w.jobs))
	for key := range w.jobs {
		keys = append(keys, key)
	}
	for len(keys) > 0 {
		batch := keys[:min(releaseBatch, len(keys))]
		keys = keys[len(batch):]
		gens := make([]int64, len(batch))
		for i, key := range batch {
			gens[i] = w.jobs[key].gen
			_ = w.callStop(ctx, key)
			delete(w.jobs, key)
		}
		n.metrics.add(ctx, n.metrics.moved, int64(len(batch)))
		t := n.table()
		outcomes, err := w.releaseJobs(ctx, t, batch, gens)
		if err == nil {
			w.countRouted(outcomes)
			continue
		}
		w.logger.Warn("batch release failed; releasing one by one", slog.Int("jobs", len(batch)), slog.Any("error", err))
		for i, key := range batch {
			outcomes, err := w.releaseJobs(ctx, t, []string{key}, gens[i:i+1])
			if err != nil {
				w.logger.Warn("release failed", slog.String("key", key), slog.Any("error", err))
				continue
			}
			w.countRouted(outcomes)
		}
	}
}

// releaseBatch is how many jobs one releaseScript call releases: it keeps
// a call well under a millisecond of Redis time.
const releaseBatch = 128
