package pool

import (
	"context"
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

// startMany claims, starts and records a batch of start events.
func (w *Worker) startMany(evs []*streaming.Event) {
	n := w.node
	type start struct {
		key    string
		h      header
		job    *Job
		record scriptCall
	}
	starts := make([]*start, 0, len(evs))
	claims := make([]*scriptCall, 0, len(evs))
	for _, ev := range evs {
		h, _, err := parseHeader(ev.Payload)
		if err != nil {
			w.logger.Error("dropping malformed event", slog.Any("error", err))
			continue
		}
		s := &start{key: ev.Topic, h: h}
		starts = append(starts, s)
		claims = append(claims, &scriptCall{keys: n.lay.recordKeys(), args: []any{s.key, h.nonce, h.gen, w.id}})
	}
	if len(claims) == 0 {
		return
	}
	n.startBatches.Add(1)
	ctx, cancel := context.WithTimeout(n.ctx, n.cfg.pendingJobTTL)
	n.runPipelined(ctx, claimScript, "claim", claims)
	cancel()

	records := make([]*scriptCall, 0, len(starts))
	ok := make([]*start, 0, len(starts))
	for i, s := range starts {
		job, claimed := w.claimed(s.key, claims[i].res, claims[i].err)
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
		s.record = scriptCall{
			keys: append(n.lay.recordKeys(), n.replyStream(s.h.replyTo)),
			args: append([]any{s.key, s.h.nonce, s.h.gen, w.id, s.h.reqID}, fieldArgs...),
		}
		records = append(records, &s.record)
		ok = append(ok, s)
	}
	if len(records) == 0 {
		return
	}
	rctx, rcancel := context.WithTimeout(n.ctx, n.cfg.pendingJobTTL)
	defer rcancel()
	n.runPipelined(rctx, startedScript, "started", records)
	for _, s := range ok {
		res, err := s.record.res, s.record.err
		if err != nil {
			// Unknown whether it ran: ask again (it is idempotent).
			res, err = w.recordStarted(rctx, s.key, s.h)
		}
		w.startRecorded(s.key, s.h, s.job.Attempt, res, err)
	}
}
