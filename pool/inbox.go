package pool

import (
	"context"
	"log/slog"

	"github.com/redis/go-redis/v9"
	"github.com/shepherd-go/shepherd/streaming"
)

// trimInbox deletes a batch of events read from the workers' streams,
// with one pipeline of XDELs, once they were handed to their workers.
// The inbox reads without a group, from its last id, so deleting only
// frees memory: the job records, not these entries, are what recovery
// trusts, and a worker that dies with events in its channel has them
// requeued from the records like any other job of a dead worker.
func (n *Node) trimInbox(batch []*streaming.Event) {
	ids := make(map[string][]string) // stream key → ids
	n.inboxMu.Lock()
	for _, ev := range batch {
		if w := n.inboxes[ev.Stream]; w != nil {
			ids[w.stream.Key()] = append(ids[w.stream.Key()], ev.ID)
		}
	}
	n.inboxMu.Unlock()
	if len(ids) == 0 {
		return
	}
	ctx, cancel := context.WithTimeout(n.ctx, loopCallTimeout)
	defer cancel()
	_, err := n.rdb.Pipelined(ctx, func(p redis.Pipeliner) error {
		for key, list := range ids {
			p.XDel(ctx, key, list...)
		}
		return nil
	})
	if err != nil && n.ctx.Err() == nil {
		n.logger.Warn("trim worker streams", slog.Any("error", err))
	}
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
