package pool

import (
	"context"
	"errors"
	"log/slog"
	"strings"

	"github.com/redis/go-redis/v9"
)

// stopEvent handles StopJob: Stop, then delete the job. dispatcher is
// what the stop event carries after its header: "node request" of a
// DispatchJob still waiting for the job's start (noReply for none).
func (w *Worker) stopEvent(ctx context.Context, key string, h header, dispatcher string) {
	n := w.node
	var stopErr error
	gen := h.gen
	if running, ok := w.jobs[key]; ok {
		gen = running.gen
		stopErr = w.stopRun(ctx, key, gen)
		delete(w.jobs, key)
		n.metrics.add(ctx, n.metrics.stopped, 1)
	}
	disp, _, _ := strings.Cut(dispatcher, " ")
	if _, err := w.stopped(ctx, key, h.nonce, gen, disp); err != nil {
		w.logger.Warn("recording a stop", slog.String("key", key), slog.Any("error", err))
	}
	if stopErr != nil {
		n.reply(ctx, h.replyTo, h.reqID, []byte(string(replyFailed)+stopErr.Error()))
		return
	}
	n.reply(ctx, h.replyTo, h.reqID, []byte{replyOK})
}

// stopped runs stoppedScript: the job's Stop ran here (or the job never
// started here), so its record goes, and the DispatchJob on node disp
// (noReply for none) still waiting for its start is told. It reports
// whether the record was still the one stopped.
func (w *Worker) stopped(ctx context.Context, key, nonce string, gen int64, disp string) (bool, error) {
	n := w.node
	res, err := n.run(ctx, stoppedScript, "stopped",
		[]string{n.lay.jobs, n.lay.payloads, n.streamOf(n.lay.nprefix, disp)},
		append(ref(nil, key, nonce, gen), w.id, disp)...)
	return res == "OK", err
}

// endStop ends the stop of a job that this worker released (it leaves)
// with the stop event still unhandled: the Stop ran with the release, so
// the record goes, and the StopJob waiting for it (and a DispatchJob still
// waiting for the job's start) are answered, as stopEvent would.
func (w *Worker) endStop(ctx context.Context, key string) error {
	n := w.node
	raw, err := n.rdb.HGet(ctx, n.lay.jobs, key).Result()
	if errors.Is(err, redis.Nil) {
		return nil
	}
	if err != nil {
		return err
	}
	r, err := parseRecord(raw)
	if err != nil {
		return err
	}
	if r.State != stateStopping || r.Worker != w.id {
		return nil
	}
	ok, err := w.stopped(ctx, key, r.Nonce, r.Gen, orNoReply(r.DispNode))
	if ok {
		n.reply(ctx, orNoReply(r.StopNode), r.StopReq, []byte{replyOK})
	}
	return err
}

// orNoReply returns node, or noReply for "".
func orNoReply(node string) string {
	if node == "" {
		return noReply
	}
	return node
}

// stoppedScript deletes a job whose Stop ran on its worker (or that was
// stopped before its worker claimed it). A DispatchJob still waiting for
// the job's start is told that it was stopped.
//
//	KEYS[1] jobs, KEYS[2] payloads, KEYS[3] the waiting dispatcher's
//	stream (a placeholder for none)
//	ARGV[1..3] job ref, ARGV[4] worker id, ARGV[5] the dispatcher node
//	the stop event named (noReply for none)
//
// Returns "OK" or "STALE".
var stoppedScript = newScript(prelude + `
local key, r = job(1)
if not r or r.w ~= ARGV[4] or r.s ~= S_STOPPING then return "STALE" end
delrec(key)
if r.rd and r.rd == ARGV[5] then send_reply(KEYS[3], r.rq, REPLY_STOPPED .. STOPPED_BEFORE_START) end
return "OK"
`)
