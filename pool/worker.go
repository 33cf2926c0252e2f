package pool

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/shepherd-go/shepherd/streaming"
)

// Worker runs jobs on a node with the user's JobHandler. Each worker reads
// its own stream and handles its events one at a time, so a slow Start
// delays the worker's other events, not other workers'.
type Worker struct {
	id      string
	index   int // WithNodeID: the worker's index on its node, from which its id is derived; -1 without
	node    *Node
	handler JobHandler
	logger  *slog.Logger
	stream  *streaming.Stream
	events  chan *streaming.Event // from the node's inbox

	dead    chan struct{} // capacity 1: the pool declared this worker dead
	stopReq chan struct{} // closed to make the loop leave
	done    chan struct{} // closed when the loop has left

	// Owned by the worker's loop goroutine.
	jobs map[string]header // running jobs: key → the start header
	slot int

	balanced  *table        // owned by the loop: the table the last full rebalance pass used
	startCost time.Duration // owned by the loop: moving average of Start's duration

	// recheck carries what the records say the worker runs, after a
	// failover (reconcile.go); capacity 1.
	recheck chan map[string]record

	clock workerClock // worker_claim.go

	stopOnce sync.Once
	running  atomic.Int64 // len(jobs), published by the loop for metrics

	parts []*Worker // WithShards: the worker in every shard, parts[0] == w; nil on a pool of one shard

	// report is the loop's latest report (report.go), published when the
	// keep-alive asks on reportReq (capacity 1), which closes the channel
	// sent once it is published.
	report    atomic.Pointer[workerReport]
	reportReq chan chan struct{}
}

// workerInbox is how many events may wait for a busy worker before the
// node's inbox stops reading for all its workers.
const workerInbox = 256

// workerInfo is a worker's entry in the workers map.
type workerInfo struct {
	Node    string `json:"node"`
	Started int64  `json:"started"`
	// Grace is the restart grace of a worker with a stable id (WithNodeID),
	// in ms: the janitor declares it dead after WorkerTTL + Grace.
	Grace int64 `json:"grace,omitempty"`
}

// ID returns the worker's id, unique in the pool.
func (w *Worker) ID() string { return w.id }

// AddWorker starts a worker with handler h on the node. The pool then
// routes a share of the jobs to it: about 1/(n+1) of the keys move onto it
// from the other workers, stopped there before they start here. On a pool
// of several shards (WithShards) the worker serves every shard: h is then
// called for different keys at once, one call at a time per shard. It
// returns an error wrapping ErrInvalidOption for a nil handler or a
// client-only node, ErrNodeClosed or ErrPoolShutdown; a failed AddWorker
// leaves no worker in any shard.
func (n *Node) AddWorker(ctx context.Context, h JobHandler) (*Worker, error) {
	if h == nil {
		return nil, fmt.Errorf("%w: nil JobHandler", ErrInvalidOption)
	}
	if n.cfg.clientOnly {
		return nil, fmt.Errorf("%w: a client-only node hosts no workers", ErrInvalidOption)
	}
	id, index := n.newWorkerID()
	if len(n.parts) < 2 {
		w, err := n.addWorker(ctx, h, id, index)
		if err != nil {
			n.freeIndex(index)
		}
		return w, err
	}
	ws := make([]*Worker, len(n.parts))
	err := n.eachPart(func(p *Node) error {
		var err error
		ws[p.shard], err = p.addWorker(ctx, h, id, index)
		return err
	})
	if err != nil {
		for _, w := range ws {
			if w != nil {
				_ = w.node.removeWorker(context.WithoutCancel(ctx), w)
			}
		}
		n.freeIndex(index)
		return nil, err
	}
	ws[0].parts = ws
	return ws[0], nil
}

// addWorker starts a worker with id (and index, for a stable id) on the
// node, or on its part in one shard.
func (n *Node) addWorker(ctx context.Context, h JobHandler, id string, index int) (*Worker, error) {
	if err := n.errClosed(); err != nil {
		return nil, err
	}
	if _, ok := n.shutdown.Get(shutdownFlag); ok {
		return nil, ErrPoolShutdown
	}
	w := &Worker{
		id: id, index: index, node: n, handler: h,
		dead: make(chan struct{}, 1), stopReq: make(chan struct{}), done: make(chan struct{}),
		events: make(chan *streaming.Event, workerInbox),
		jobs:   make(map[string]header), slot: -1,
		recheck: make(chan map[string]record, 1), reportReq: make(chan chan struct{}, 1),
	}
	w.logger = n.logger.With(slog.String("worker", w.id))
	var err error
	if w.stream, err = streaming.NewStream(n.rdb, n.pool, workerStreamName(w.id)); err != nil {
		return nil, err
	}
	if err := createStream(ctx, n.rdb, w.stream.Key()); err != nil {
		return nil, fmt.Errorf("pool: add worker: %w", err)
	}
	n.inboxMu.Lock()
	n.inboxes[w.stream.Name()] = w
	n.inboxMu.Unlock()
	unfollow := func() {
		_ = n.inbox.Remove(context.WithoutCancel(ctx), w.stream)
		n.inboxMu.Lock()
		delete(n.inboxes, w.stream.Name())
		n.inboxMu.Unlock()
	}
	if err := w.follow(ctx); err != nil {
		unfollow()
		w.abandon(context.WithoutCancel(ctx))
		return nil, fmt.Errorf("pool: add worker: %w", err)
	}
	if err := w.register(ctx); err != nil {
		unfollow()
		w.abandon(context.WithoutCancel(ctx))
		return nil, fmt.Errorf("pool: add worker: %w", err)
	}
	n.mu.Lock()
	if n.closed {
		n.mu.Unlock()
		close(w.done) // the loop never started
		_ = w.leave(context.WithoutCancel(ctx), false)
		return nil, n.errClosed()
	}
	n.myWorkers[w.id] = w
	n.mu.Unlock()
	if !n.loops.Go(w.loop) {
		close(w.done) // the node stopped meanwhile; its stop removes the worker
	}
	return w, nil
}

// register records the worker: keep-alive first (so the janitor does not
// reap it), then the workers map, then the lowest free slot. A worker
// with a stable id (WithNodeID) keeps the slot it has, and takes back the
// jobs whose records name it (reclaim), before its loop starts.
func (w *Worker) register(ctx context.Context) error {
	n := w.node
	info := workerInfo{Node: n.id, Started: time.Now().UnixMilli()}
	if w.index >= 0 {
		if err := w.registerStable(ctx); err != nil {
			return err
		}
		info.Grace = n.cfg.restartGrace.Milliseconds()
	} else if err := n.rdb.HSet(ctx, n.lay.alive, "w:"+w.id, redisNowMs(ctx, n)).Err(); err != nil {
		return err
	}
	raw, _ := json.Marshal(info)
	if _, err := n.workers.Set(ctx, w.id, string(raw)); err != nil {
		return err
	}
	slot := -1
	if w.index >= 0 {
		slot = n.table().slotOf(w.id)
	}
	if slot < 0 {
		var err error
		if slot, err = n.claimSlot(ctx, w.id); err != nil {
			return err
		}
	}
	w.slot = slot
	if w.index >= 0 {
		if _, err := w.reclaim(ctx); err != nil {
			return err
		}
	}
	return nil
}

// follow makes the node's inbox read the worker's stream: from its
// newest entry, or, for a worker with a stable id, from its oldest, so
// that a restarted worker answers what came for it meanwhile (stale
// starts and stops are dropped by their scripts; a notification finds no
// job).
func (w *Worker) follow(ctx context.Context) error {
	if w.index >= 0 {
		return w.node.inbox.AddFromStart(ctx, w.stream)
	}
	return w.node.inbox.Add(ctx, w.stream)
}

// abandon undoes a failed AddWorker: a worker with a random id is deleted
// (keep-alive and stream), while one with a stable id leaves what its
// predecessor left (it may be restarting); its index is free again.
func (w *Worker) abandon(ctx context.Context) {
	w.node.freeIndex(w.index)
	if w.index < 0 {
		w.cleanup(ctx)
	}
}

// redisNowMs returns Redis's clock in ms, or 0 (which reads as long dead)
// if it cannot.
func redisNowMs(ctx context.Context, n *Node) int64 {
	t, err := n.rdb.Time(ctx).Result()
	if err != nil {
		return 0
	}
	return t.UnixMilli()
}

// declaredDead tells the worker that the pool reaped it (it missed its
// keep-alives, for instance while frozen).
func (w *Worker) declaredDead() {
	select {
	case w.dead <- struct{}{}:
	default:
	}
}

// loop is the worker's one goroutine: it handles the worker's events,
// moves jobs that belong elsewhere after the slots change, and stops stale
// jobs when the pool declared the worker dead.
func (w *Worker) loop() {
	defer close(w.done)
	n := w.node
	changes, cancel := n.slots.Subscribe()
	defer cancel()
	for {
		w.running.Store(int64(len(w.jobs)))
		select {
		case ev := <-w.events:
			if ev.Event == evStart {
				ev = w.startBatch(ev)
			}
			if ev != nil {
				w.handle(ev)
				w.settle(ev.Topic)
			}
		case <-changes:
			w.rebalance()
		case <-w.dead:
			w.revive()
		case expect := <-w.recheck:
			w.reconcile(expect)
		case published := <-w.reportReq:
			w.publishReport()
			close(published)
		case <-w.stopReq:
			return
		case <-n.ctx.Done():
			return
		}
	}
}

func (w *Worker) handle(ev *streaming.Event) {
	h, rest, err := parseHeader(ev.Payload)
	if err != nil {
		w.logger.Error("dropping malformed event", slog.Any("error", err))
		return
	}
	cfg := w.node.cfg
	switch ev.Event { // start events go to startBatch
	case evStop:
		ctx, cancel := context.WithTimeout(w.node.ctx, cfg.stopTimeout())
		defer cancel()
		w.stopEvent(ctx, ev.Topic, h, string(rest))
	case evNotify:
		ctx, cancel := context.WithTimeout(w.node.ctx, cfg.notifyTimeout())
		defer cancel()
		w.notify(ctx, ev.Topic, h, rest)
	}
}

// notify hands a notification to the handler.
func (w *Worker) notify(ctx context.Context, key string, h header, payload []byte) {
	n := w.node
	if _, ok := w.jobs[key]; !ok {
		n.reply(ctx, h.replyTo, h.reqID, []byte{replyNoJob})
		return
	}
	nh, ok := w.handler.(NotificationHandler)
	if !ok {
		n.reply(ctx, h.replyTo, h.reqID, []byte(string(replyFailed)+"handler does not implement NotificationHandler"))
		return
	}
	err := safely(w.logger, "HandleNotification", key, func() error { return nh.HandleNotification(ctx, key, payload) })
	if err != nil {
		n.reply(ctx, h.replyTo, h.reqID, []byte(string(replyFailed)+err.Error()))
		return
	}
	n.reply(ctx, h.replyTo, h.reqID, []byte{replyOK})
}
