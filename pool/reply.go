package pool

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/shepherd-go/shepherd/internal/streamfields"
	"github.com/shepherd-go/shepherd/streaming"
)

// waiter is a call waiting for a reply on the node's stream.
type waiter struct {
	ch    chan []byte // capacity 1: the reply
	kind  string      // opDispatch, opStop or opNotify
	key   string
	nonce string    // the dispatch's nonce; "" for other calls
	since time.Time // when the call began to wait
	gone  int       // checkWaits found the dispatch's job gone this many times
}

// await registers a waiter for a reply to a new request id.
func (n *Node) await(kind, key, nonce string) (string, chan []byte) {
	id := newID()
	w := &waiter{ch: make(chan []byte, 1), kind: kind, key: key, nonce: nonce, since: time.Now()}
	n.mu.Lock()
	n.waiters[id] = w
	n.mu.Unlock()
	return id, w.ch
}

func (n *Node) forget(reqID string) {
	n.mu.Lock()
	delete(n.waiters, reqID)
	n.mu.Unlock()
}

// answer hands reply p to the call waiting for reqID, if it still waits.
func (n *Node) answer(reqID string, p []byte) {
	n.mu.Lock()
	w := n.waiters[reqID]
	delete(n.waiters, reqID)
	n.mu.Unlock()
	if w != nil {
		w.ch <- p
	}
}

// replyError turns a worker's reply into DispatchJob's, StopJob's or
// NotifyWorker's error.
func replyError(key string, p []byte) error {
	if len(p) == 0 {
		return errors.New("pool: empty reply")
	}
	switch p[0] {
	case replyOK:
		return nil
	case replyStartFailed:
		worker, msg, _ := strings.Cut(string(p[1:]), "\n")
		return &StartError{Key: key, Worker: worker, Msg: msg}
	case replyNoJob:
		if len(p) > 1 {
			return fmt.Errorf("%w: %q: %s", ErrNoWorker, key, p[1:])
		}
		return fmt.Errorf("%w: %q", ErrNoWorker, key)
	case replyStopped:
		return fmt.Errorf("%w: %q: %s", ErrJobStopped, key, p[1:])
	default:
		return fmt.Errorf("pool: job %q: %s", key, p[1:])
	}
}

// reply answers a request of node to (a no-op for noReply). NOMKSTREAM:
// a node that is gone does not get its stream back.
func (n *Node) reply(ctx context.Context, to, reqID string, payload []byte) {
	if to == noReply {
		return
	}
	err := n.rdb.XAdd(ctx, &redis.XAddArgs{
		Stream: n.lay.nprefix + to, NoMkStream: true,
		Values: []any{streamfields.Event, evReply, streamfields.Topic, reqID, streamfields.Payload, payload},
	}).Err()
	if err != nil && !errors.Is(err, redis.Nil) {
		n.logger.Warn("reply failed", slog.String("to", to), slog.Any("error", err))
	}
}

// replyLoop hands the answers on the node's stream to the calls waiting
// for them, and deletes what it read (trimEvery, trimIdle).
func (n *Node) replyLoop() {
	events := n.replies.Subscribe()
	pending := newTrims()
	key := n.nodeStream.Key()
	idle := time.NewTimer(trimIdle)
	defer idle.Stop()
	for {
		var ev *streaming.Event
		select {
		case <-n.ctx.Done():
			return
		case <-idle.C:
			n.trimStreams(pending)
			continue
		case e, ok := <-events:
			if !ok {
				return
			}
			ev = e
		}
		// Answer every reply already waiting; delete them and what came
		// before (trimThrough) once enough piled up.
		batch := drain(ev, events)
		for _, ev := range batch {
			if ev.Event != evReply {
				continue
			}
			// A batch of starts answers its dispatches in one entry:
			// their request ids joined by commas (startedScript).
			for id := range strings.SplitSeq(ev.Topic, ",") {
				n.answer(id, ev.Payload)
			}
		}
		pending.last[key] = batch[len(batch)-1].ID
		pending.n += len(batch)
		if pending.n >= trimEvery {
			n.trimStreams(pending)
		}
		idle.Reset(trimIdle)
	}
}

// resync settles the calls waiting for answers that may have been lost
// (the pool declared this node dead and deleted its stream, or Redis lost
// everything) from the job records: a dispatch whose job runs succeeded,
// one whose job is gone did not; a stop whose job is gone is done; a
// notification's fate is unknown. Calls whose job is still on its way keep
// waiting: their answer comes to the node's stream, which exists again.
func (n *Node) resync(ctx context.Context, lost bool) {
	n.mu.Lock()
	ids := make([]string, 0, len(n.waiters))
	ws := make([]*waiter, 0, len(n.waiters))
	for id, w := range n.waiters {
		ids, ws = append(ids, id), append(ws, w)
	}
	n.mu.Unlock()
	if len(ws) == 0 {
		return
	}
	reads, now := n.readWaited(ctx, ws)
	why := "this node was cut off from the pool (declared dead) meanwhile"
	if lost {
		why = "Redis lost the pool's state (it restarted empty)"
	}
	for i, w := range ws {
		rec, exists := reads[i].rec, reads[i].exists
		if !reads[i].known {
			continue // keep waiting
		}
		switch w.kind {
		case opDispatch:
			if exists && rec.Nonce == w.nonce {
				if rec.State == stateRunning && (!rec.Pending || n.handedStarted(rec, now)) {
					n.answer(ids[i], []byte{replyOK})
				}
				continue
			}
			n.answer(ids[i], []byte(string(replyStopped)+"it ended while "+why+": its Start failed, or it was stopped"))
		case opStop:
			if !exists {
				n.answer(ids[i], []byte{replyOK})
			}
		case opNotify:
			n.answer(ids[i], []byte(string(replyNoJob)+"the answer was lost: "+why+"; the notification may or may not have been handled"))
		}
	}
}

// waited is the record of the job a call waits for, as readWaited read it.
type waited struct {
	rec    record
	exists bool // the job has a record
	known  bool // the record was read and parsed: false leaves the call waiting
}

// readWaited reads, in one pipeline, the records of the jobs ws wait for
// and Redis's clock (ms; 0 when unknown).
func (n *Node) readWaited(ctx context.Context, ws []*waiter) ([]waited, int64) {
	cmds := make([]*redis.StringCmd, len(ws))
	var clock *redis.TimeCmd
	_, _ = n.rdb.Pipelined(ctx, func(p redis.Pipeliner) error { // errors are per command
		for i, w := range ws {
			cmds[i] = p.HGet(ctx, n.lay.jobs, w.key)
		}
		clock = p.Time(ctx)
		return nil
	})
	out := make([]waited, len(ws))
	for i, cmd := range cmds {
		raw, err := cmd.Result()
		switch {
		case errors.Is(err, redis.Nil):
			out[i].known = true
		case err == nil:
			rec, perr := parseRecord(raw)
			out[i] = waited{rec: rec, exists: true, known: perr == nil}
		}
	}
	t, err := clock.Result()
	if err != nil {
		return out, 0
	}
	return out, t.UnixMilli()
}

// handedStarted reports whether a handed job (record.Pending), still
// handed at nowMs (Redis's clock), started, its answer lost: its worker
// takes it without a claim only within PendingJobTTL/4 of its admission
// (Worker.fresh), its Start then succeeds, or fails or returns late
// within PendingJobTTL (which changes the record), and a worker that
// dies or is cut off meanwhile has it queued again after WorkerTTL. A
// handed record older than all of that says the Start succeeded.
func (n *Node) handedStarted(rec record, nowMs int64) bool {
	if nowMs == 0 {
		return false
	}
	settled := n.cfg.pendingJobTTL*5/4 + n.cfg.workerTTL
	return nowMs-rec.Created > settled.Milliseconds()
}

// maxWaitChecks bounds the records one checkWaits reads.
const maxWaitChecks = 1000

// waitCheckAfter is how long a DispatchJob waits for its answer before
// checkWaits looks at its job's record: WorkerTTL, the time a worker's
// death takes to be noticed.
func (n *Node) waitCheckAfter() time.Duration { return n.cfg.workerTTL }

// checkWaits settles the DispatchJob calls that have waited longer than
// waitCheckAfter and whose answer will not come on the node's stream. A
// job handed to its worker (record.Pending) is answered by that worker
// alone, and its record does not say who waits: when the worker died
// before it answered, the janitor queued the job again, and the start
// that took it over answers nobody. From the record: a job started
// since (its record says running, recorded) succeeded; one whose later
// Start failed (its record keeps the error) failed, and is withdrawn; one
// whose record is gone, found so twice (a failed Start's answer follows
// its record's deletion), ended. Any other keeps waiting, a handed one
// included: its worker answers, or dies and the record changes (resync,
// after answers were lost, judges handed records by their age too).
func (n *Node) checkWaits(ctx context.Context) {
	old := time.Now().Add(-n.waitCheckAfter())
	n.mu.Lock()
	var ids []string
	var ws []*waiter
	for id, w := range n.waiters {
		if w.kind == opDispatch && w.since.Before(old) {
			ids, ws = append(ids, id), append(ws, w)
			if len(ws) == maxWaitChecks {
				break // the others at the next keep-alive
			}
		}
	}
	n.mu.Unlock()
	if len(ws) == 0 {
		return
	}
	reads, _ := n.readWaited(ctx, ws)
	for i, w := range ws {
		rec := reads[i].rec
		if !reads[i].known {
			continue // keep waiting
		}
		if !reads[i].exists || rec.Nonce != w.nonce {
			n.mu.Lock()
			w.gone++
			g := w.gone
			n.mu.Unlock()
			if g >= 2 {
				n.answer(ids[i], []byte(string(replyStopped)+"it ended before it was known to run: its Start failed, or it was stopped"))
			}
			continue
		}
		switch {
		case rec.State == stateRunning && !rec.Pending:
			n.answer(ids[i], []byte{replyOK})
		case rec.State != stateRunning && rec.State != stateStopping && rec.LastErr != "":
			n.answer(ids[i], []byte(string(replyStartFailed)+rec.Worker+"\n"+rec.LastErr))
		}
	}
}
