package pool

import (
	"context"
	"log/slog"
)

// handOverAll stops every job of the worker and gives each back to the
// pool, as move does, but in batches: the Stop handlers of a batch run
// first, one by one, then the batch's release scripts go in one pipeline.
// A worker with thousands of jobs thus leaves in a few round trips rather
// than one per job, and each job is still stopped here before it is queued
// for another worker. A release that failed in the pipeline (the script
// not loaded yet, an error) is retried on its own; if that fails too, the
// janitor requeues the job once this worker is gone.
func (w *Worker) handOverAll(ctx context.Context) {
	n := w.node
	keys := make([]string, 0, len(w.jobs))
	for key := range w.jobs {
		keys = append(keys, key)
	}
	for len(keys) > 0 {
		batch := keys[:min(maxBatch, len(keys))]
		keys = keys[len(batch):]
		t := n.table()
		calls := make([]*scriptCall, len(batch))
		for i, key := range batch {
			c := &scriptCall{}
			c.keys, c.args = w.releaseCall(t, key, w.jobs[key].gen)
			calls[i] = c
			_ = w.callStop(ctx, key)
			delete(w.jobs, key)
		}
		n.metrics.add(ctx, n.metrics.moved, int64(len(batch)))
		n.runPipelined(ctx, releaseScript, "release", calls)
		for i, c := range calls {
			if c.err == nil {
				if c.res == "ROUTED" {
					n.releasesRouted.Add(1)
				}
				continue
			}
			// Retried on its own once; if that fails too, the janitor
			// requeues the job once this worker is gone.
			if _, err := n.run(ctx, releaseScript, "release", c.keys, c.args...); err != nil {
				w.logger.Warn("release failed", slog.String("key", batch[i]), slog.Any("error", err))
			}
		}
	}
}
