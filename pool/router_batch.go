package pool

import (
	"context"
	"log/slog"
	"time"

	"github.com/shepherd-go/shepherd/streaming"
)

// maxBatch bounds how many events a loop takes from its channel at once
// to handle in one pipeline.
const maxBatch = 256

// drain returns first and the events already waiting in ch, up to
// maxBatch in all, without blocking. A closed ch ends the batch; the
// caller's next receive sees it closed.
func drain(first *streaming.Event, ch <-chan *streaming.Event) []*streaming.Event {
	batch := []*streaming.Event{first}
	for len(batch) < maxBatch {
		select {
		case ev, ok := <-ch:
			if !ok {
				return batch
			}
			batch = append(batch, ev)
		default:
			return batch
		}
	}
	return batch
}

// routeBatch routes the start events of evs with one table snapshot, one
// pipeline of route scripts and one acknowledgement: three round trips
// for the batch instead of two per event. Events the batch could not
// settle (the router's table was behind, an error) go through route one
// by one. It returns the events that found
// no worker, to be parked.
func (n *Node) routeBatch(evs []*streaming.Event) []*streaming.Event {
	if len(evs) == 1 {
		if n.route(evs[0]) {
			return nil
		}
		return evs
	}
	ctx, cancel := context.WithTimeout(n.ctx, 10*time.Second)
	defer cancel()
	var acks, parked, again, routed []*streaming.Event
	var calls []*scriptCall
	t := n.table()
	for _, ev := range evs {
		if ev.Event != evStart {
			acks = append(acks, ev)
			continue
		}
		h, _, err := parseHeader(ev.Payload)
		if err != nil {
			n.logger.Error("dropping malformed job event", slog.String("id", ev.ID), slog.Any("error", err))
			acks = append(acks, ev)
			continue
		}
		w := t.owner(ev.Topic)
		if w == "" {
			parked = append(parked, ev)
			continue
		}
		keys, args := n.routeCall(ev.Topic, h, w, t.rev)
		calls = append(calls, &scriptCall{keys: keys, args: args})
		routed = append(routed, ev)
	}
	if len(calls) > 0 {
		n.runPipelined(ctx, routeScript, "route", calls)
	}
	for i, c := range calls {
		if c.err != nil || c.res == "RETRY" {
			again = append(again, routed[i])
			continue
		}
		acks = append(acks, routed[i])
	}
	if err := n.sink.AckBatch(ctx, acks); err != nil && n.ctx.Err() == nil {
		n.logger.Warn("ack failed; the events will be routed again", slog.Any("error", err))
	}
	for _, ev := range again {
		if !n.route(ev) {
			parked = append(parked, ev)
		}
	}
	return parked
}
