package pool

import (
	"context"
	"log/slog"
	"strconv"
)

// handOverAll stops every job of the worker and gives each back to the
// pool, as move does, but in batches: the Stop handlers of a batch run
// first, one by one, then one releaseManyScript call releases the batch.
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
		scriptKeys, args := w.releaseManyCall(t, batch, gens)
		res, err := n.run(ctx, releaseManyScript, "release", scriptKeys, args...)
		out, _ := res.([]any)
		if err == nil && len(out) == len(batch) {
			for _, o := range out {
				if o == "ROUTED" {
					n.releasesRouted.Add(1)
				}
			}
			continue
		}
		w.logger.Warn("batch release failed; releasing one by one", slog.Int("jobs", len(batch)), slog.Any("error", err))
		for i, key := range batch {
			keys, args := w.releaseCall(t, key, gens[i])
			if _, err := n.run(ctx, releaseScript, "release", keys, args...); err != nil {
				w.logger.Warn("release failed", slog.String("key", key), slog.Any("error", err))
			}
		}
	}
}

// releaseBatch is how many jobs one releaseManyScript call releases: it
// keeps a call well under a millisecond of Redis time.
const releaseBatch = 128

// releaseManyCall returns releaseManyScript's KEYS and ARGV for giving back
// keys (of generations gens), each to its owner under t when there is one.
func (w *Worker) releaseManyCall(t table, keys []string, gens []int64) ([]string, []any) {
	n := w.node
	scriptKeys := []string{n.lay.jobs, n.lay.payloads, n.lay.jobStream, n.lay.workers, n.lay.slotsRev}
	args := append([]any{w.id, strconv.FormatInt(t.rev, 10)}, fieldArgs...)
	args = append(args, n.lay.nprefix)
	streamIdx := map[string]int{}
	for i, key := range keys {
		owner, idx := t.owner(key), 0
		if owner == w.id {
			owner = "" // our own table still names us: let a router decide
		}
		if owner != "" {
			if idx = streamIdx[owner]; idx == 0 {
				scriptKeys = append(scriptKeys, n.lay.wprefix+owner)
				idx = len(scriptKeys) - 5
				streamIdx[owner] = idx
			}
		}
		args = append(args, key, gens[i], owner, idx)
	}
	return scriptKeys, args
}
