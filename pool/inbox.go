package pool

import (
	"context"
	"log/slog"
	"strconv"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/shepherd-go/shepherd/streaming"
)

// The loops that read streams without a group (the inbox, the reply
// loop) trim what they handled in batches: every trimEvery entries of
// their streams, or trimIdle after the last entry handled, whichever
// comes first. XTRIM MINID ~ frees only whole stream nodes (up to 100
// entries, 4 KB), so trimming after each read freed little and cost Redis
// a round trip a read (about half a command per dispatch); trimming every
// 100 entries keeps what waits to be trimmed at about a stream node's
// worth per node (scenario E reads Redis's memory right after its
// dispatches).
const (
	trimEvery = 100
	trimIdle  = 250 * time.Millisecond
)

// trims is what a loop handled and has not trimmed yet.
type trims struct {
	last  map[string]string // stream key → the last id handled
	owner map[string]string // stream key → worker id (the inbox's streams)
	n     int               // entries handled since the last trim
}

func newTrims() *trims {
	return &trims{last: map[string]string{}, owner: map[string]string{}}
}

// noteInbox adds a batch the inbox handed to its workers.
func (n *Node) noteInbox(t *trims, batch []*streaming.Event) {
	n.inboxMu.Lock()
	for _, ev := range batch {
		if w := n.inboxes[ev.Stream]; w != nil {
			t.last[w.stream.Key()] = ev.ID // a stream's entries come in order
			t.owner[w.stream.Key()] = w.id
			t.n++
		}
	}
	n.inboxMu.Unlock()
}

// trimInbox deletes the events of a batch read from the workers' streams,
// once they were handed to their workers, and whatever came before them.
func (n *Node) trimInbox(batch []*streaming.Event) {
	t := newTrims()
	n.noteInbox(t, batch)
	n.trimStreams(t)
}

// trimStreams deletes the entries t holds and whatever came before them:
// one XTRIM MINID per stream, in one pipeline (afterID), and empties t.
// The inbox reads without a group, from its last id, so deleting only
// frees memory: the job records, not these entries, are what recovery
// trusts, and a worker that dies with events in its channel has them
// requeued from the records like any other job of a dead worker.
//
// A node with a stable identity (WithNodeID) shares its workers' streams
// (those t names an owner of)
// with the process that may take its id over while it is cut off: until
// its next keep-alive tells it, it still reads them, and must not delete
// what its successor has yet to read. It trims through trimOwnScript,
// which trims only the streams of workers still registered by it.
func (n *Node) trimStreams(t *trims) {
	last, owner := t.last, t.owner
	t.last, t.owner, t.n = map[string]string{}, map[string]string{}, 0
	if len(last) == 0 {
		return
	}
	ctx, cancel := context.WithTimeout(n.ctx, loopCallTimeout)
	defer cancel()
	var err error
	plain := make(map[string]string, len(last))
	for key, id := range last {
		if w := owner[key]; w != "" && n.cfg.identity != "" {
			if _, e := n.run(ctx, trimOwnScript, "trim", []string{n.lay.workers, key}, w, n.id, afterID(id)); e != nil {
				err = e
			}
			continue
		}
		plain[key] = id
	}
	if len(plain) > 0 {
		_, e := n.rdb.Pipelined(ctx, func(p redis.Pipeliner) error {
			for key, id := range plain {
				trimThrough(ctx, p, key, id)
			}
			return nil
		})
		if e != nil {
			err = e
		}
	}
	if err != nil && n.ctx.Err() == nil {
		n.logger.Warn("trim streams", slog.Any("error", err))
	}
}

// trimOwnScript trims a worker's stream as trimThrough does, if the
// worker is still registered by this node.
//
//	KEYS[1] workers map, KEYS[2] the worker's stream
//	ARGV[1] worker id, ARGV[2] node id, ARGV[3] the id to trim before
//
// Returns the entries deleted, or -1 when the worker is another node's.
var trimOwnScript = redis.NewScript(workerLua + `
if not worker_of(KEYS[1], ARGV[1], ARGV[2]) then return -1 end
return redis.call("XTRIM", KEYS[2], "MINID", "~", ARGV[3])
`)

// trimThrough deletes the entries of the stream at key up to id (and
// that one), as a reader following it from its last id finished them:
// XTRIM MINID with "~", so that Redis frees whole nodes of entries and
// touches none of the rest (an entry or a hundred may stay until their
// node is done). Deleting the entries one by one (XDEL) cost Redis about
// 2.5 µs an entry, a start event and a reply per dispatch.
func trimThrough(ctx context.Context, p redis.Pipeliner, key, id string) {
	p.XTrimMinIDApprox(ctx, key, afterID(id), 0)
}

// afterID returns the stream id right after id ("ms-seq").
func afterID(id string) string {
	ms, seq, ok := strings.Cut(id, "-")
	n, err := strconv.ParseUint(seq, 10, 64)
	if !ok || err != nil {
		return id // not an id of Redis's: trim before it only
	}
	return ms + "-" + strconv.FormatUint(n+1, 10)
}

// replyStream returns the stream key of node to, the node waiting for an
// answer; for noReply, this node's own stream stands in, since a script
// needs some key of the pool.
func (n *Node) replyStream(to string) string {
	if to == noReply {
		return n.nodeStream.Key()
	}
	return n.lay.nprefix + to
}

// inboxLoop hands each worker the events of its stream, and trims what
// it handed out (trimEvery, trimIdle).
func (n *Node) inboxLoop() {
	events := n.inbox.Subscribe()
	pending := newTrims()
	idle := time.NewTimer(trimIdle)
	defer idle.Stop()
	for {
		select {
		case <-n.ctx.Done():
			return
		case <-idle.C:
			n.trimStreams(pending)
		case ev, ok := <-events:
			if !ok {
				return
			}
			batch := drain(ev, events)
			for _, ev := range batch {
				n.inboxMu.Lock()
				w := n.inboxes[ev.Stream]
				n.inboxMu.Unlock()
				if w == nil {
					continue // the worker left; the janitor requeues its jobs
				}
				select {
				case w.events <- ev:
				case <-w.done:
				case <-n.ctx.Done():
					return
				}
			}
			n.noteInbox(pending, batch)
			if pending.n >= trimEvery {
				n.trimStreams(pending)
			}
			idle.Reset(trimIdle)
		}
	}
}

// createStream makes sure an empty stream exists at key (a new worker's),
// so that the node's inbox follows an existing stream from its start.
func createStream(ctx context.Context, rdb redis.UniversalClient, key string) error {
	id, err := rdb.XAdd(ctx, &redis.XAddArgs{Stream: key, Values: []any{"init", "1"}}).Result()
	if err != nil {
		return err
	}
	return rdb.XDel(ctx, key, id).Err()
}
