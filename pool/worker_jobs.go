package pool

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"runtime/debug"
	"strconv"
	"time"
)

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
	if len(out) != 4 || out[0] != "OK" {
		return nil, false
	}
	payload, _ := out[1].(string)
	created, _ := strconv.ParseInt(fmt.Sprint(out[2]), 10, 64)
	attempt, _ := strconv.Atoi(fmt.Sprint(out[3]))
	return &Job{Key: key, Payload: []byte(payload), CreatedAt: time.UnixMilli(created), Attempt: attempt}, true
}

// runStart runs the Start handler of a claimed job, once a Stop of its key
// still running here has returned, and returns its error and how long it
// took. Start's ctx ends after PendingJobTTL: an error after that says so.
func (w *Worker) runStart(job *Job) (time.Duration, error) {
	n := w.node
	ctx, cancel := context.WithTimeout(n.ctx, n.cfg.pendingJobTTL)
	defer cancel()
	w.awaitStop(ctx, job.Key)
	began := time.Now()
	err := safely(w.logger, "Start", job.Key, func() error { return w.handler.Start(ctx, job) })
	took := time.Since(began)
	n.metrics.startDone(ctx, began, err)
	if w.startCost == 0 {
		w.startCost = took
	} else {
		w.startCost += (took - w.startCost) / 8
	}
	if err != nil && errors.Is(ctx.Err(), context.DeadlineExceeded) {
		err = fmt.Errorf("Start did not return within PendingJobTTL (%v): %w", n.cfg.pendingJobTTL, err)
	}
	return took, err
}

// startFailed records that Start failed: the job is deleted and its
// dispatcher told, or it is queued again (after a move).
func (w *Worker) startFailed(key string, h header, startErr error) {
	n := w.node
	ctx, cancel := context.WithTimeout(n.ctx, n.cfg.pendingJobTTL)
	defer cancel()
	res, err := n.run(ctx, failedScript, "start failed",
		[]string{n.lay.jobs, n.lay.payloads, n.lay.jobStream},
		key, h.nonce, h.gen, w.id)
	if err != nil {
		w.logger.Warn("recording a failed start", slog.String("key", key), slog.Any("error", err))
	}
	w.logger.Info("start failed", slog.String("key", key), slog.Any("outcome", res), slog.Any("error", startErr))
	if res == "REQUEUED" {
		n.metrics.add(ctx, n.metrics.requeued, 1)
	}
	if res == "DELETED" {
		n.reply(ctx, h.replyTo, h.reqID, []byte(string(replyStartFailed)+w.id+"\n"+startErr.Error()))
	}
}

// startRecorded acts on startedScript's outcome for a job whose Start
// succeeded after took.
func (w *Worker) startRecorded(key string, h header, attempt int, took time.Duration, res any, err error) {
	n := w.node
	if err != nil || res == "STALE" {
		// The job was taken away while Start ran (or we cannot tell):
		// stop it here, so that it runs on one worker only. The start
		// that took over answers a waiting DispatchJob.
		if took > n.cfg.pendingJobTTL {
			w.logger.Warn("Start took longer than PendingJobTTL: the pool gave the job up meanwhile (started again, or failed its DispatchJob after maxSlowStarts attempts); stopping it here",
				slog.String("key", key), slog.Duration("took", took), slog.Duration("pending_job_ttl", n.cfg.pendingJobTTL), slog.Int("attempt", attempt))
		} else {
			w.logger.Warn("job taken away during Start; stopping it", slog.String("key", key), slog.Any("error", err))
		}
		sctx, scancel := context.WithTimeout(context.WithoutCancel(n.ctx), n.cfg.workerShutdownTTL)
		defer scancel()
		_ = w.callStop(sctx, key)
		return
	}
	w.jobs[key] = h // startedScript answered the dispatcher
	n.metrics.add(n.ctx, n.metrics.started, 1)
	w.logger.Debug("job started", slog.String("key", key), slog.Int("attempt", attempt))
}

// callStop runs the Stop handler, waiting no longer than ctx allows: a
// handler that ignores its ctx is left running, so that Close, RemoveWorker
// and moves stay bounded by WorkerShutdownTTL. A later Start of the same
// key on this worker waits for such a Stop to return (awaitStop).
func (w *Worker) callStop(ctx context.Context, key string) error {
	done := make(chan error, 1)
	finished := make(chan struct{})
	go func() {
		defer close(finished)
		done <- safely(w.logger, "Stop", key, func() error { return w.handler.Stop(ctx, key) })
	}()
	var err error
	select {
	case err = <-done:
	case <-ctx.Done():
		err = fmt.Errorf("pool: Stop of %q did not return in time: %w", key, ctx.Err())
		w.stopsMu.Lock()
		if w.stopsAlive == nil {
			w.stopsAlive = make(map[string]chan struct{})
		}
		w.stopsAlive[key] = finished
		w.stopsMu.Unlock()
	}
	if err != nil {
		w.logger.Warn("stop failed", slog.String("key", key), slog.Any("error", err))
	}
	return err
}

// awaitStop waits until a Stop of key that outlived its deadline has
// returned, or ctx ends.
func (w *Worker) awaitStop(ctx context.Context, key string) {
	w.stopsMu.Lock()
	finished := w.stopsAlive[key]
	w.stopsMu.Unlock()
	if finished == nil {
		return
	}
	select {
	case <-finished:
		w.stopsMu.Lock()
		if w.stopsAlive[key] == finished {
			delete(w.stopsAlive, key)
		}
		w.stopsMu.Unlock()
	case <-ctx.Done():
	}
}

// stopEvent handles StopJob: Stop, then delete the job.
func (w *Worker) stopEvent(ctx context.Context, key string, h header) {
	n := w.node
	var stopErr error
	gen := h.gen
	if running, ok := w.jobs[key]; ok {
		gen = running.gen
		stopErr = w.callStop(ctx, key)
		delete(w.jobs, key)
		n.metrics.add(ctx, n.metrics.stopped, 1)
	}
	if _, err := n.run(ctx, stoppedScript, "stopped", []string{n.lay.jobs, n.lay.payloads}, key, gen, w.id, n.lay.nprefix); err != nil {
		w.logger.Warn("recording a stop", slog.String("key", key), slog.Any("error", err))
	}
	if stopErr != nil {
		n.reply(ctx, h.replyTo, h.reqID, []byte(string(replyFailed)+stopErr.Error()))
		return
	}
	n.reply(ctx, h.replyTo, h.reqID, []byte{replyOK})
}

// notify hands a notification to the handler.
func (w *Worker) notify(ctx context.Context, key string, h header, payload []byte) {
	n := w.node
	if _, ok := w.jobs[key]; !ok {
		n.reply(ctx, h.replyTo, h.reqID, []byte{replyNoJob})
		return
	}
	nh, ok := w.handler.(NotificationHandler)
	if !ok {
		n.reply(ctx, h.replyTo, h.reqID, []byte(string(replyFailed)+"handler does not implement NotificationHandler"))
		return
	}
	err := safely(w.logger, "HandleNotification", key, func() error { return nh.HandleNotification(ctx, key, payload) })
	if err != nil {
		n.reply(ctx, h.replyTo, h.reqID, []byte(string(replyFailed)+err.Error()))
		return
	}
	n.reply(ctx, h.replyTo, h.reqID, []byte{replyOK})
}

// rebalance moves the jobs that the current table gives to another live
// worker: Stop here first, then release, so the new owner starts the job
// only after it stopped here.
func (w *Worker) rebalance() {
	if len(w.jobs) == 0 {
		return
	}
	t := w.node.table()
	w.balanced = &t
	for key := range w.jobs {
		if owner := t.owner(key); owner != "" && owner != w.id {
			w.move(key)
		}
	}
}

// move stops a job here and gives it back to the pool.
func (w *Worker) move(key string) {
	n := w.node
	ctx, cancel := context.WithTimeout(context.WithoutCancel(n.ctx), n.cfg.workerShutdownTTL)
	defer cancel()
	h := w.jobs[key]
	_ = w.callStop(ctx, key)
	delete(w.jobs, key)
	n.metrics.add(ctx, n.metrics.moved, 1)
	if err := w.release(ctx, key, h); err != nil {
		// The record still names this worker: the janitor requeues the job
		// once this worker is gone (release retried until it leaves).
		w.logger.Error("release failed", slog.String("key", key), slog.Any("error", err))
	}
}

// revive handles the pool having declared this worker dead: its jobs were
// (or will be) started elsewhere, so it stops them here without touching
// their records, and joins again as a fresh member.
func (w *Worker) revive() {
	n := w.node
	w.logger.Warn("worker was declared dead; stopping its stale jobs and rejoining", slog.Int("jobs", len(w.jobs)))
	ctx, cancel := context.WithTimeout(n.ctx, n.cfg.workerShutdownTTL)
	defer cancel()
	for key := range w.jobs {
		_ = w.callStop(ctx, key)
		delete(w.jobs, key)
	}
	if _, ok := n.shutdown.Get(shutdownFlag); ok {
		return
	}
	if err := w.register(ctx); err != nil && n.ctx.Err() == nil {
		// The next keep-alive reports this worker dead again: retry then.
		w.logger.Error("rejoin failed", slog.Any("error", err))
	}
}
