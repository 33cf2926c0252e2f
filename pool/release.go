package pool

import (
	"context"
	"fmt"
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
		outcomes, err := w.releaseJobs(ctx, n.table(), []string{key}, []int64{h.gen})
		if err == nil {
			w.countRouted(outcomes)
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

// releaseJobs runs releaseScript for keys (of generations gens), each
// handed to its owner under t when there is one, and returns one outcome
// per job.
func (w *Worker) releaseJobs(ctx context.Context, t table, keys []string, gens []int64) ([]any, error) {
	n := w.node
	sk := newScriptKeys(n.lay.jobs, n.lay.payloads, n.lay.jobStream, n.lay.workers, n.lay.slotsRev)
	args := []any{w.id, strconv.FormatInt(t.rev, 10), n.lay.nprefix}
	for i, key := range keys {
		owner, idx := t.owner(key), 0
		if owner == w.id {
			owner = "" // our own table still names us: let a router decide
		}
		if owner != "" {
			idx = sk.add(n.lay.wprefix + owner)
		}
		args = append(args, key, gens[i], owner, idx)
	}
	res, err := n.run(ctx, releaseScript, "release", sk.keys, args...)
	return perJob(res, err, len(keys), "release")
}

// countRouted counts, for tests, the released jobs that went straight to
// their new owner.
func (w *Worker) countRouted(outcomes []any) {
	for _, o := range outcomes {
		if o == "ROUTED" {
			w.node.releasesRouted.Add(1)
		}
	}
}

// perJob checks that a batch script answered once per job.
func perJob(res any, err error, jobs int, op string) ([]any, error) {
	if err != nil {
		return nil, err
	}
	out, _ := res.([]any)
	if len(out) != jobs {
		return nil, fmt.Errorf("pool: %s: %d replies for %d jobs", op, len(out), jobs)
	}
	return out, nil
}
