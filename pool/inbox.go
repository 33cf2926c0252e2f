package pool

import (
	"context"
	"log/slog"
	"strconv"
	"strings"

	"github.com/redis/go-redis/v9"
	"github.com/shepherd-go/shepherd/streaming"
)

// trimInbox deletes the events of a batch read from the workers' streams,
// once they were handed to their workers, and whatever came before them:
// one XTRIM MINID per stream, in one pipeline (afterID). The inbox reads
// without a group, from its last id, so deleting only frees memory: the
// job records, not these entries, are what recovery trusts, and a worker
// that dies with events in its channel has them requeued from the records
// like any other job of a dead worker.
func (n *Node) trimInbox(batch []*streaming.Event) {
	last := make(map[string]string) // stream key → the last id handed out
	n.inboxMu.Lock()
	for _, ev := range batch {
		if w := n.inboxes[ev.Stream]; w != nil {
			last[w.stream.Key()] = ev.ID // a stream's entries come in order
		}
	}
	n.inboxMu.Unlock()
	if len(last) == 0 {
		return
	}
	ctx, cancel := context.WithTimeout(n.ctx, loopCallTimeout)
	defer cancel()
	_, err := n.rdb.Pipelined(ctx, func(p redis.Pipeliner) error {
		for key, id := range last {
			trimThrough(ctx, p, key, id)
		}
		return nil
	})
	if err != nil && n.ctx.Err() == nil {
		n.logger.Warn("trim worker streams", slog.Any("error", err))
	}
}

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

// inboxLoop hands each worker the events of its stream.
func (n *Node) inboxLoop() {
	events := n.inbox.Subscribe()
	for {
		select {
		case <-n.ctx.Done():
			return
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
			n.trimInbox(batch)
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
