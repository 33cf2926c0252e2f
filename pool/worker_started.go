package pool

import (
	"context"
	"time"
)

// recordStarted runs startedScript for a job whose Start succeeded. An
// error leaves it unknown whether the script ran (Redis may have applied
// it and died before answering), so it asks again until Redis answers or
// ctx ends: the script is idempotent. Stopping the job on the first error
// instead would leave a record saying "running here" with nothing
// running, which no recovery notices.
func (w *Worker) recordStarted(ctx context.Context, key string, h header) (any, error) {
	n := w.node
	wait := 10 * time.Millisecond
	for {
		outcomes, err := w.recordJobs(ctx, []startRef{{key: key, h: h}})
		if err == nil {
			return outcomes[0], nil
		}
		if ctx.Err() != nil || n.ctx.Err() != nil {
			return nil, err
		}
		t := time.NewTimer(wait) // retry backoff while Redis is unreachable
		select {
		case <-t.C:
		case <-ctx.Done():
			t.Stop()
			return nil, err
		}
		wait = min(2*wait, time.Second)
	}
}
