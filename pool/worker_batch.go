package pool

import (
	"context"
	"log/slog"
	"time"

	"github.com/shepherd-go/shepherd/streaming"
)

// Start events waiting for a worker are started in batches: one
// claimScript call, the Start handlers one after another, then one
// startedScript call, whose record of each job answers its dispatcher. A batch holds as
// many starts as fit in startBatchBudget at the handler's average Start
// duration, so that a slow handler gets batches of one, as before: a
// batch delays each dispatcher's answer until the whole batch has started.
const (
	maxStartBatch    = 64
	startBatchBudget = 5 * time.Millisecond
)

// startBatchSize is how many start events the next batch may take.
func (w *Worker) startBatchSize() int {
	if w.startCost <= 0 {
		return maxStartBatch
	}
	return max(1, min(maxStartBatch, int(startBatchBudget/w.startCost)))
}

// startBatch starts first and the start events waiting behind it (every
// start event of the worker goes through here). It returns the first
// other event it took from the channel, for the caller to handle next
// (events of one worker keep their order), or nil.
func (w *Worker) startBatch(first *streaming.Event) *streaming.Event {
	evs := []*streaming.Event{first}
	var next *streaming.Event
	limit := w.startBatchSize()
fill:
	for len(evs) < limit {
		select {
		case ev := <-w.events:
			if ev.Event != evStart {
				next = ev
				break fill
			}
			evs = append(evs, ev)
		default:
			break fill
		}
	}
	if len(evs) > 1 {
		w.node.startBatches.Add(1)
	}
	w.startMany(evs)
	for _, ev := range evs {
		w.settle(ev.Topic)
	}
	return next
}

// startMany claims, starts and records a batch of start events (or one):
// one claimScript call, the Start handlers one by one, one startedScript
// call.
func (w *Worker) startMany(evs []*streaming.Event) {
	n := w.node
	starts := make([]startRef, 0, len(evs))
	for _, ev := range evs {
		h, _, err := parseHeader(ev.Payload)
		if err != nil {
			w.logger.Error("dropping malformed event", slog.Any("error", err))
			continue
		}
		starts = append(starts, startRef{key: ev.Topic, h: h})
	}
	if len(starts) == 0 {
		return
	}
	ctx, cancel := context.WithTimeout(n.ctx, n.cfg.pendingJobTTL)
	claims, err := w.claimJobs(ctx, starts)
	cancel()
	if err != nil {
		w.logger.Warn("claim failed; the jobs will be moved after PendingJobTTL", slog.Int("jobs", len(starts)), slog.Any("error", err))
		return
	}
	started := starts[:0:0]
	attempts := make([]int, 0, len(starts))
	took := make([]time.Duration, 0, len(starts))
	for i, s := range starts {
		job, claimed := w.claimed(s.key, claims[i])
		if !claimed {
			continue
		}
		d, err := w.runStart(job)
		if err != nil {
			w.startFailed(s.key, s.h, err)
			continue
		}
		started = append(started, s)
		attempts = append(attempts, job.Attempt)
		took = append(took, d)
	}
	if len(started) == 0 {
		return
	}
	rctx, rcancel := context.WithTimeout(n.ctx, n.cfg.pendingJobTTL)
	defer rcancel()
	outcomes, err := w.recordJobs(rctx, started)
	for i, s := range started {
		var res any
		var err2 error
		if err != nil {
			// Unknown whether it ran: ask again, job by job, until Redis
			// answers (startedScript is idempotent).
			res, err2 = w.recordStarted(rctx, s.key, s.h)
		} else {
			res = outcomes[i]
		}
		w.startRecorded(s.key, s.h, attempts[i], took[i], res, err2)
	}
}

// startRef names a start event: the job's key and the event's header.
type startRef struct {
	key string
	h   header
}

// claimJobs runs claimScript for starts and returns one reply per job.
func (w *Worker) claimJobs(ctx context.Context, starts []startRef) ([]any, error) {
	n := w.node
	args := make([]any, 0, 1+3*len(starts))
	args = append(args, w.id)
	for _, s := range starts {
		args = append(args, s.key, s.h.nonce, s.h.gen)
	}
	res, err := n.run(ctx, claimScript, "claim", n.lay.recordKeys(), args...)
	return perJob(res, err, len(starts), "claim")
}

// recordJobs runs startedScript for jobs whose Start succeeded and returns
// one outcome per job.
func (w *Worker) recordJobs(ctx context.Context, started []startRef) ([]any, error) {
	n := w.node
	sk := newScriptKeys(n.lay.recordKeys()...)
	args := []any{w.id}
	for _, s := range started {
		idx := 0
		if s.h.reqID != noReply && s.h.replyTo != noReply {
			idx = sk.add(n.replyStream(s.h.replyTo))
		}
		args = append(args, s.key, s.h.nonce, s.h.gen, s.h.reqID, idx)
	}
	res, err := n.run(ctx, startedScript, "started", sk.keys, args...)
	return perJob(res, err, len(started), "started")
}
