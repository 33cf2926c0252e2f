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
	nonce string // the dispatch's nonce; "" for other calls
}

// await registers a waiter for a reply to a new request id.
func (n *Node) await(kind, key, nonce string) (string, chan []byte) {
	id := newID()
	w := &waiter{ch: make(chan []byte, 1), kind: kind, key: key, nonce: nonce}
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
	cmds := make([]*redis.StringCmd, len(ws))
	_, _ = n.rdb.Pipelined(ctx, func(p redis.Pipeliner) error { // errors are per command
		for i, w := range ws {
			cmds[i] = p.HGet(ctx, n.lay.jobs, w.key)
		}
		return nil
	})
	why := "this node was cut off from the pool (declared dead) meanwhile"
	if lost {
		why = "Redis lost the pool's state (it restarted empty)"
	}
	for i, w := range ws {
		raw, err := cmds[i].Result()
		if err != nil && !errors.Is(err, redis.Nil) {
			continue // unknown: keep waiting
		}
		var rec record
		exists := err == nil
		if exists {
			if rec, err = parseRecord(raw); err != nil {
				continue // unknown: keep waiting
			}
		}
		switch w.kind {
		case opDispatch:
			if exists && rec.Nonce == w.nonce {
				if rec.State == stateRunning {
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
