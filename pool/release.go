package pool

import (
	"context"
	"log/slog"
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
		_, err := n.run(ctx, releaseScript, "release",
			[]string{n.lay.jobs, n.lay.payloads, n.lay.jobStream},
			append([]any{key, h.gen, w.id}, fieldArgs...)...)
		if err == nil {
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
