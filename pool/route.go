package pool

import (
	"context"
	"log/slog"
	"strconv"
	"time"

	"github.com/shepherd-go/shepherd/streaming"
)

// routeLoop reads the job stream through the routers' group and hands
// each start event to the worker its key belongs to. Events that find no
// worker are parked, unacknowledged, and tried again when the slots change
// or every second: they are never dropped.
func (n *Node) routeLoop() {
	changes, cancel := n.slots.Subscribe()
	defer cancel()
	tick := time.NewTicker(parkedRetry)
	defer tick.Stop()
	parked := make(map[string]*streaming.Event)
	retry := func() {
		for id, ev := range parked {
			if n.route(ev) {
				delete(parked, id)
			}
		}
	}
	events := n.sink.Subscribe()
	for {
		select {
		case ev, ok := <-events:
			if !ok {
				return
			}
			for _, ev := range n.routeBatch(drain(ev, events)) {
				parked[ev.ID] = ev
			}
		case <-changes:
			retry()
		case <-tick.C:
			retry()
		case <-n.ctx.Done():
			return
		}
	}
}

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
	ctx, cancel := context.WithTimeout(n.ctx, loopCallTimeout)
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

// route routes one start event and reports whether it is done with it
// (routed or dropped as stale, and acknowledged).
func (n *Node) route(ev *streaming.Event) bool {
	ctx, cancel := context.WithTimeout(n.ctx, loopCallTimeout)
	defer cancel()
	if ev.Event != evStart {
		n.ack(ctx, ev)
		return true
	}
	h, _, err := parseHeader(ev.Payload)
	if err != nil {
		n.logger.Error("dropping malformed job event", slog.String("id", ev.ID), slog.Any("error", err))
		n.ack(ctx, ev)
		return true
	}
	for attempt := 0; attempt < 3; attempt++ {
		t := n.table()
		w := t.owner(ev.Topic)
		if w == "" {
			return false
		}
		keys, args := n.routeCall(ev.Topic, h, w, t.rev)
		res, err := n.run(ctx, routeScript, "route", keys, args...)
		if err != nil {
			if n.ctx.Err() == nil {
				n.logger.Warn("route failed", slog.String("key", ev.Topic), slog.Any("error", err))
			}
			return false
		}
		if res != "RETRY" {
			n.ack(ctx, ev)
			return true
		}
		// Our copy of the slots is behind Redis: catch up and decide again.
		if err := n.slots.Sync(ctx); err != nil {
			return false
		}
	}
	return false
}

// routeCall returns routeScript's KEYS and ARGV for handing the job key,
// whose start event carries h, to worker w under the slot table revision
// rev.
func (n *Node) routeCall(key string, h header, w string, rev int64) ([]string, []any) {
	return []string{n.lay.jobs, n.lay.payloads, n.lay.workers, n.lay.slotsRev, n.lay.wprefix + w},
		append(ref(nil, key, h.nonce, h.gen), w, strconv.FormatInt(rev, 10))
}

func (n *Node) ack(ctx context.Context, ev *streaming.Event) {
	if err := n.sink.Ack(ctx, ev); err != nil && n.ctx.Err() == nil {
		n.logger.Warn("ack failed; the event will be routed again", slog.Any("error", err))
	}
}

// routeScript hands a queued job to a worker.
//
//	KEYS[1] jobs, KEYS[2] payloads, KEYS[3] workers map, KEYS[4] slots
//	map revision, KEYS[5] the worker's stream
//	ARGV[1..3] job ref, ARGV[4] worker id,
//	ARGV[5] the slots revision the router decided on
//
// Returns "OK"; "STALE" when the event is outdated (the job was stopped,
// re-queued or already routed): drop it; "RETRY" when the router's copy of
// the slots is behind Redis or the worker is gone: decide again.
var routeScript = newScript(prelude + `
local key, r = job(1)
if not r or r.s ~= S_QUEUED then return "STALE" end
if redis.call("HGET", KEYS[4], REV_FIELD) ~= ARGV[5] then return "RETRY" end
if redis.call("HEXISTS", KEYS[3], ARGV[4]) == 0 then return "RETRY" end
r.s = S_ROUTED; r.w = ARGV[4]; r.t = now_ms()
putrec(key, r)
send_start(KEYS[5], key, r)
return "OK"
`)
