package pool

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"runtime/debug"
	"strconv"
	"time"
	"unicode/utf8"

	"github.com/shepherd-go/shepherd/streaming"
)

// Start events waiting for a worker are started in batches: one
// claimScript call for the events that need one, the Start handlers one
// after another, then the dispatchers' answers: one reply entry per
// dispatching node for the jobs handed to the worker (worker_claim.go),
// one startedScript call, whose record of each job answers its
// dispatcher, for the others. A batch holds as
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
		w.node.test.startBatches.Add(1)
	}
	w.startMany(evs)
	for _, ev := range evs {
		w.settle(ev.Topic)
	}
	return next
}

// startMany claims, starts and answers a batch of start events (or one):
// one claimScript call for the events that need one (those not handed by
// their admission, or not fresh: worker_claim.go), the Start handlers one
// by one, then the answers of the handed jobs (answerHanded) and one
// startedScript call for the others.
func (w *Worker) startMany(evs []*streaming.Event) {
	n := w.node
	starts := make([]startRef, 0, len(evs))
	jobs := make([]*Job, 0, len(evs)) // a fresh event's job, handed by its admission; nil: claim it
	var claims, repeats []startRef
	var pre []bool
	for _, ev := range evs {
		h, rest, err := parseHeader(ev.Payload)
		if err != nil {
			w.logger.Error("dropping malformed event", slog.Any("error", err))
			continue
		}
		if running, ok := w.jobs[ev.Topic]; ok && running.gen >= h.gen && running.nonce == h.nonce {
			// A start of a generation the worker already runs: a repeat
			// (a claim would answer it STALE; a handed job's record says
			// running, which it does). Its dispatcher may still wait:
			// after a failover, the node's reconciliation starts a handed
			// job from its record, before its start event comes.
			if running.gen == h.gen && waits(h) == "1" {
				repeats = append(repeats, startRef{key: ev.Topic, h: h})
			}
			continue
		}
		s := startRef{key: ev.Topic, h: h}
		job, isPre := preclaimed(ev.Topic, rest)
		if isPre && w.fresh(ev.ID) {
			w.node.test.claimsSkipped.Add(1)
		} else {
			job = nil
			claims, pre = append(claims, s), append(pre, isPre)
		}
		starts, jobs = append(starts, s), append(jobs, job)
	}
	if len(repeats) > 0 {
		ctx, cancel := context.WithTimeout(n.ctx, n.cfg.startTimeout())
		if _, err := w.answerHanded(ctx, repeats); err != nil {
			w.logger.Warn("answering the dispatchers of jobs running already", slog.Any("error", err))
		}
		cancel()
	}
	if len(starts) == 0 {
		return
	}
	claimed := make([]bool, len(starts)) // by claimScript: startedScript records its start
	if len(claims) > 0 {
		ctx, cancel := context.WithTimeout(n.ctx, n.cfg.startTimeout())
		res, err := w.claimJobs(ctx, claims, pre)
		cancel()
		if err != nil {
			w.logger.Warn("claim failed; the jobs will be moved after PendingJobTTL", slog.Int("jobs", len(claims)), slog.Any("error", err))
			res = nil
		}
		for i, c := 0, 0; i < len(starts); i++ {
			if jobs[i] != nil {
				continue
			}
			claimed[i] = true
			if res != nil {
				jobs[i], _ = w.claimed(claims[c].key, res[c])
			}
			c++
		}
	}
	// The jobs whose Start succeeded: those whose dispatchers the worker
	// answers itself (handed), and those startedScript records (record).
	var handed, record []startedJob
	for i, s := range starts {
		job := jobs[i]
		if job == nil {
			continue
		}
		d, err := w.runStart(job, s.h.gen)
		if err != nil {
			w.startFailed(s.key, s.h, err)
			continue
		}
		if !claimed[i] && d > n.cfg.pendingJobTTL {
			w.startTooSlow(s.key, s.h, d)
			continue
		}
		sj := startedJob{ref: s, attempt: job.Attempt, took: d, handed: !claimed[i]}
		if claimed[i] || !w.certainlyAlive() {
			// Claimed, or handed to a worker that cannot tell any more
			// that it is alive (paused, or Start took long): startedScript
			// records the start if the job is still this worker's.
			record = append(record, sj)
			continue
		}
		handed = append(handed, sj)
	}
	rctx, rcancel := context.WithTimeout(n.ctx, n.cfg.startTimeout())
	defer rcancel()
	if len(handed) > 0 {
		outcomes, err := w.answerHanded(rctx, refsOf(handed))
		for i, sj := range handed {
			if err != nil || outcomes[i] == answerLost {
				// The answer may not have gone, or would be lost:
				// startedScript records the start and answers.
				record = append(record, sj)
				continue
			}
			w.startRecorded(sj.ref.key, sj.ref.h, sj.attempt, sj.took, outcomes[i], nil, true)
		}
		if err != nil {
			w.logger.Debug("answering dispatchers failed; recording the starts instead", slog.Any("error", err))
		}
	}
	if len(record) == 0 {
		return
	}
	outcomes, err := w.recordJobs(rctx, refsOf(record))
	for i, sj := range record {
		var res any
		var err2 error
		if err != nil {
			// Unknown whether it ran: ask again, job by job, until Redis
			// answers (startedScript is idempotent).
			res, err2 = w.recordStarted(rctx, sj.ref.key, sj.ref.h)
		} else {
			res = outcomes[i]
		}
		w.startRecorded(sj.ref.key, sj.ref.h, sj.attempt, sj.took, res, err2, sj.handed)
	}
}

// startedJob is a job whose Start succeeded, on its way to its
// dispatcher's answer or startedScript.
type startedJob struct {
	ref     startRef
	attempt int
	took    time.Duration // how long Start took
	handed  bool          // handed to this worker by its admission, not claimed
}

// refsOf returns the start events of jobs.
func refsOf(jobs []startedJob) []startRef {
	refs := make([]startRef, len(jobs))
	for i, j := range jobs {
		refs[i] = j.ref
	}
	return refs
}

// startRef names a start event: the job's key and the event's header.
type startRef struct {
	key string
	h   header
}

// truncateUTF8 cuts s to at most n bytes, at a rune boundary.
func truncateUTF8(s string, n int) string {
	if len(s) <= n {
		return s
	}
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return s[:n]
}

// safely calls a user handler, turning a panic into an error.
func safely(logger *slog.Logger, what, key string, f func() error) (err error) {
	defer func() {
		if r := recover(); r != nil {
			logger.Error("handler panicked", slog.String("handler", what), slog.String("key", key),
				slog.Any("panic", r), slog.String("stack", string(debug.Stack())))
			err = fmt.Errorf("pool: %s handler panicked: %v", what, r)
		}
	}()
	return f()
}

// claimed turns claimScript's reply for one job into the job to start, or
// false when the event was stale (stopped, moved, or already running
// here).
func (w *Worker) claimed(key string, res any) (*Job, bool) {
	out, _ := res.([]any)
	if len(out) != 5 || out[0] != "OK" {
		return nil, false
	}
	payload, _ := out[1].(string)
	created, _ := strconv.ParseInt(fmt.Sprint(out[2]), 10, 64)
	attempt, _ := strconv.Atoi(fmt.Sprint(out[3]))
	tc, _ := out[4].(string)
	return &Job{Key: key, Payload: []byte(payload), CreatedAt: time.UnixMilli(created), Attempt: attempt, trace: tc}, true
}

// runStart runs the Start handler of a claimed job in generation gen,
// fenced by startRun (after every other handler call of its key on this
// node, and after the Stop of a stale run of it here), and returns its
// error and how long it took. Start's ctx ends after PendingJobTTL: an
// error after that says so.
func (w *Worker) runStart(job *Job, gen int64) (time.Duration, error) {
	n := w.node
	ctx, cancel := context.WithTimeout(n.ctx, n.cfg.startTimeout())
	defer cancel()
	ctx, span := n.startStart(ctx, job)
	began := time.Now()
	err := w.startRun(ctx, job, gen)
	defer func() { endSpan(span, err) }()
	took := time.Since(began)
	n.metrics.startDone(ctx, began, err)
	if w.startCost == 0 {
		w.startCost = took
	} else {
		w.startCost += (took - w.startCost) / 8
	}
	if err != nil && errors.Is(ctx.Err(), context.DeadlineExceeded) {
		err = fmt.Errorf("the Start handler did not return within PendingJobTTL (%v): %w", n.cfg.pendingJobTTL, err)
	}
	return took, err
}
