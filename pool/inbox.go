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
//
// A node with a stable identity (WithNodeID) shares its workers' streams
// with the process that may take its id over while it is cut off: until
// its next keep-alive tells it, it still reads them, and must not delete
// what its successor has yet to read. It deletes through trimOwnScript,
// which deletes only from the streams of workers still registered by it.
func (n *Node) trimInbox(batch []*streaming.Event) {
	ids := make(map[string][]string) // stream key → ids
	owner := make(map[string]string) // stream key → worker id
	n.inboxMu.Lock()
	for _, ev := range batch {
		if w := n.inboxes[ev.Stream]; w != nil {
			ids[w.stream.Key()] = append(ids[w.stream.Key()], ev.ID)
			owner[w.stream.Key()] = w.id
		}
	}
	n.inboxMu.Unlock()
	if len(ids) == 0 {
		return
	}
	ctx, cancel := context.WithTimeout(n.ctx, loopCallTimeout)
	defer cancel()
	var err error
	if n.cfg.identity != "" {
		for key, list := range ids {
			if _, e := n.run(ctx, trimOwnScript, "trim", []string{n.lay.workers, key}, append([]any{owner[key], n.id}, strs(list)...)...); e != nil {
				err = e
			}
		}
	} else {
		_, err = n.rdb.Pipelined(ctx, func(p redis.Pipeliner) error {
			for key, list := range ids {
				p.XDel(ctx, key, list...)
			}
			return nil
		})
	}
	if err != nil && n.ctx.Err() == nil {
		n.logger.Warn("trim worker streams", slog.Any("error", err))
	}
}

// trimOwnScript deletes entries of a worker's stream if the worker is
// still registered by this node.
//
//	KEYS[1] workers map, KEYS[2] the worker's stream
//	ARGV[1] worker id, ARGV[2] node id, ARGV[3..] entry ids
//
// Returns the entries deleted, or -1 when the worker is another node's.
var trimOwnScript = redis.NewScript(workerLua + `
if not worker_of(KEYS[1], ARGV[1], ARGV[2]) then return -1 end
return redis.call("XDEL", KEYS[2], unpack(ARGV, 3))
`)

func strs(list []string) []any {
	out := make([]any, len(list))
	for i, v := range list {
		out[i] = v
	}
	return out
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
