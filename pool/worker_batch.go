package pool

import (
	"context"
	"fmt"
	"log/slog"
	"time"

	"github.com/shepherd-go/shepherd/streaming"
)

// Start events waiting for a worker are started in batches: one pipeline
// of claims, the Start handlers one after another, then one pipeline of
// started records, each of which answers its dispatcher. A batch holds as
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

// startBatch starts first and the start events waiting behind it. It
// returns the first other event it took from the channel, for the caller
// to handle next (events of one worker keep their order), or nil.
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
	if len(evs) == 1 {
		w.handle(first)
		w.settle(first.Topic)
		return next
	}
	w.startMany(evs)
	for _, ev := range evs {
		w.settle(ev.Topic)
	}
	return next
}

// startMany claims, starts and records a batch of start events: one
// claimManyScript call, the Start handlers one by one, one
// startedManyScript call.
func (w *Worker) startMany(evs []*streaming.Event) {
	n := w.node
	type start struct {
		key string
		h   header
		job *Job
	}
	starts := make([]*start, 0, len(evs))
	claimArgs := []any{w.id}
	for _, ev := range evs {
		h, _, err := parseHeader(ev.Payload)
		if err != nil {
			w.logger.Error("dropping malformed event", slog.Any("error", err))
			continue
		}
		starts = append(starts, &start{key: ev.Topic, h: h})
		claimArgs = append(claimArgs, ev.Topic, h.nonce, h.gen)
	}
	if len(starts) == 0 {
		return
	}
	n.startBatches.Add(1)
	ctx, cancel := context.WithTimeout(n.ctx, n.cfg.pendingJobTTL)
	res, err := n.run(ctx, claimManyScript, "claim", n.lay.recordKeys(), claimArgs...)
	cancel()
	claims, _ := res.([]any)
	if err == nil && len(claims) != len(starts) {
		err = fmt.Errorf("pool: claim: %d replies for %d jobs", len(claims), len(starts))
	}
	if err != nil {
		w.logger.Warn("claim failed; the jobs will be moved after PendingJobTTL", slog.Int("jobs", len(starts)), slog.Any("error", err))
		return
	}

	ok := make([]*start, 0, len(starts))
	recordKeys := n.lay.recordKeys()
	recordArgs := append([]any{w.id}, fieldArgs...)
	streams := map[string]int{}
	for i, s := range starts {
		job, claimed := w.claimed(s.key, claims[i], nil)
		if !claimed {
			continue
		}
		s.job = job
		sctx, scancel := context.WithTimeout(n.ctx, n.cfg.pendingJobTTL)
		err := w.runStart(sctx, job)
		scancel()
		if err != nil {
			w.startFailed(s.key, s.h, err)
			continue
		}
		idx := 0
		if s.h.reqID != noReply && s.h.replyTo != noReply {
			stream := n.replyStream(s.h.replyTo)
			if idx = streams[stream]; idx == 0 {
				recordKeys = append(recordKeys, stream)
				idx = len(recordKeys) - 3
				streams[stream] = idx
			}
		}
		recordArgs = append(recordArgs, s.key, s.h.nonce, s.h.gen, s.h.reqID, idx)
		ok = append(ok, s)
	}
	if len(ok) == 0 {
		return
	}
	rctx, rcancel := context.WithTimeout(n.ctx, n.cfg.pendingJobTTL)
	defer rcancel()
	res, err = n.run(rctx, startedManyScript, "started", recordKeys, recordArgs...)
	outcomes, _ := res.([]any)
	if err == nil && len(outcomes) != len(ok) {
		err = fmt.Errorf("pool: started: %d replies for %d jobs", len(outcomes), len(ok))
	}
	for i, s := range ok {
		var res any
		var err2 error
		if err != nil {
			// Unknown whether it ran: ask again, job by job (startedScript
			// is idempotent).
			res, err2 = w.recordStarted(rctx, s.key, s.h)
		} else {
			res = outcomes[i]
		}
		w.startRecorded(s.key, s.h, s.job.Attempt, res, err2)
	}
}
