package pool

import (
	"context"
	"log/slog"
	"strconv"
	"time"

	"github.com/shepherd-go/shepherd/jumphash"
	"github.com/shepherd-go/shepherd/streaming"
)

// table is a snapshot of the slots map: the jump-hash table of workers.
type table struct {
	size  int
	slots map[int]string // slot → worker id
	rev   int64
}

func (n *Node) table() table {
	// Built once per change of the local slots map, not per call: every
	// dispatch and every handled event asks for it. The slots and their
	// revision come from one snapshot; if Redis has moved on meanwhile, the
	// route and admit scripts, comparing revisions, refuse the decision.
	v := n.slots.Version()
	if c := n.tableCache.Load(); c != nil && c.version == v {
		return c.t
	}
	m, rev, v := n.slots.Snapshot()
	t := table{slots: make(map[int]string, len(m)), rev: rev}
	for k, v := range m {
		if k == sizeField {
			t.size, _ = strconv.Atoi(v)
			continue
		}
		if i, err := strconv.Atoi(k); err == nil {
			t.slots[i] = v
		}
	}
	for i := range t.slots {
		if i >= t.size {
			t.size = i + 1
		}
	}
	n.tableCache.Store(&cachedTable{t: t, version: v})
	return t
}

// cachedTable is the table built from version of the local slots map.
// Its slots map is shared by every caller: read-only.
type cachedTable struct {
	t       table
	version uint64
}

// owner returns the worker that key belongs to, or "" when there is none.
func (t table) owner(key string) string {
	if len(t.slots) == 0 {
		return ""
	}
	b := jumphash.HashLiveString(key, t.size, func(i int) bool { _, ok := t.slots[i]; return ok })
	if b < 0 {
		return ""
	}
	return t.slots[b]
}

// routeLoop reads the job stream through the routers' group and hands
// each start event to the worker its key belongs to. Events that find no
// worker are parked, unacknowledged, and tried again when the slots change
// or every second: they are never dropped.
func (n *Node) routeLoop() {
	changes, cancel := n.slots.Subscribe()
	defer cancel()
	tick := time.NewTicker(time.Second)
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

// route routes one start event and reports whether it is done with it
// (routed or dropped as stale, and acknowledged).
func (n *Node) route(ev *streaming.Event) bool {
	ctx, cancel := context.WithTimeout(n.ctx, 10*time.Second)
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
		[]any{key, h.nonce, h.gen, w, strconv.FormatInt(rev, 10)}
}

func (n *Node) ack(ctx context.Context, ev *streaming.Event) {
	if err := n.sink.Ack(ctx, ev); err != nil && n.ctx.Err() == nil {
		n.logger.Warn("ack failed; the event will be routed again", slog.Any("error", err))
	}
}
