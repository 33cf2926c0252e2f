package pool

import (
	"context"
	"fmt"
	"log/slog"

	"github.com/redis/go-redis/v9"
)

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

// stoppedScript deletes a job whose Stop ran on its worker (or that was
// stopped before its worker claimed it). A DispatchJob still waiting for
// the job's start is told that it was stopped.
//
//	KEYS[1] jobs, KEYS[2] payloads
//	ARGV[1] key, ARGV[2] generation, ARGV[3] worker id, ARGV[4] node
//	stream prefix
//
// Returns "OK" or "STALE".
var stoppedScript = redis.NewScript(prelude + `
local r = getrec(ARGV[1])
if not r or r.g ~= tonumber(ARGV[2]) or r.w ~= ARGV[3] or r.s ~= S_STOPPING then return "STALE" end
delrec(ARGV[1])
if r.rd and r.rd ~= NO_REPLY then
  send_reply(ARGV[4] .. r.rd, r.rq, REPLY_STOPPED .. "StopJob ended it before its Start")
end
return "OK"
`)
