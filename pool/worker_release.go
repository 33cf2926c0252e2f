package pool

import (
	"context"
	"log/slog"

	"github.com/redis/go-redis/v9"
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
		args := make([][]any, len(batch))
		for i, key := range batch {
			args[i] = append([]any{key, w.jobs[key].gen, w.id}, fieldArgs...)
			_ = w.callStop(ctx, key)
			delete(w.jobs, key)
		}
		n.metrics.add(ctx, n.metrics.moved, int64(len(batch)))
		scriptKeys := []string{n.lay.jobs, n.lay.payloads, n.lay.jobStream}
		pipe := n.rdb.Pipeline()
		cmds := make([]*redis.Cmd, len(batch))
		for i := range batch {
			cmds[i] = releaseScript.EvalSha(ctx, pipe, scriptKeys, args[i]...)
		}
		_, _ = pipe.Exec(ctx) // errors are per command, handled below
		for i, cmd := range cmds {
			if cmd.Err() == nil {
				continue
			}
			if _, err := n.run(ctx, releaseScript, "release", scriptKeys, args[i]...); err != nil {
				w.logger.Warn("release failed", slog.String("key", batch[i]), slog.Any("error", err))
			}
		}
	}
}
