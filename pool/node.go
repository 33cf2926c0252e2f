package pool

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/shepherd-go/shepherd/internal/script"
	"github.com/shepherd-go/shepherd/rmap"
	"github.com/shepherd-go/shepherd/streaming"
)

// Node is a process's membership in a pool. A full node routes jobs to
// workers and hosts workers; a client-only node (WithClientOnly) only
// dispatches, stops and notifies. A Node is safe for concurrent use.
type Node struct {
	id     string
	pool   string
	rdb    redis.UniversalClient
	cfg    nodeConfig
	lay    layout
	logger *slog.Logger

	jobStream  *streaming.Stream
	nodeStream *streaming.Stream
	replies    *streaming.Reader
	sink       *streaming.Sink        // nil on a client-only node
	inbox      *streaming.MultiReader // reads all our workers' streams; nil on a client-only node
	inboxMu    sync.Mutex
	inboxes    map[string]*Worker // worker stream name → worker
	workers    *rmap.Map
	slots      *rmap.Map
	shutdown   *rmap.Map
	tableCache atomic.Pointer[cachedTable] // see table

	ctx    context.Context // cancelled when the node stops
	cancel context.CancelFunc
	wg     sync.WaitGroup

	mu         sync.Mutex
	closed     bool
	shutDown   bool // closed because the pool shut down
	myWorkers  map[string]*Worker
	waiters    map[string]*waiter // request id → the call waiting for its reply
	admissions chan *admission    // DispatchJob → admitLoop
	admitting  atomic.Int64       // admissions under way, queued ones included
	closeOnce  sync.Once
	closeErr   error
	closedChan chan struct{}
	doneChan   chan struct{} // closed once stop has finished: Done

	keepAlivePaused atomic.Bool    // tests: simulate a frozen process
	startBatches    atomic.Int64   // tests: start batches of more than one job
	releasesRouted  atomic.Int64   // tests: released jobs handed straight to their new owner
	admitHook       func(ran bool) // tests: runs before and after an admission pipeline

	bgMu     sync.Mutex
	bgClosed bool
	bg       sync.WaitGroup     // withdrawals of failed dispatches
	bgCtx    context.Context    // ends when Close gives up waiting for them
	bgCancel context.CancelFunc // ends bgCtx

	metrics *metrics
}

// AddNode joins the pool called poolName (creating it if needed) through
// rdb and returns the node. rdb may be a single client, a Sentinel-backed
// failover client or a Cluster client: all of a pool's keys share the hash
// tag {poolName}. Build rdb with ContextTimeoutEnabled: go-redis ignores
// context deadlines on socket I/O without it, and calls against a hung
// Redis would then last the client's read timeout instead of their ctx
// (AddNode logs a warning). It returns an error wrapping ErrInvalidOption for a nil
// client, an empty pool name or one containing "}", or an invalid option;
// ErrPoolShutdown while the pool shuts down; or the Redis error that
// stopped it, leaving nothing behind. Close the node when done.
func AddNode(ctx context.Context, poolName string, rdb redis.UniversalClient, opts ...NodeOption) (*Node, error) {
	lay, err := poolLayout(rdb, poolName)
	if err != nil {
		return nil, err
	}
	cfg := defaultNodeConfig()
	for _, o := range opts {
		if o == nil {
			return nil, fmt.Errorf("%w: nil option", ErrInvalidOption)
		}
		if err := o(&cfg); err != nil {
			return nil, err
		}
	}
	n := &Node{
		id: newID(), pool: poolName, rdb: rdb, cfg: cfg, lay: lay,
		myWorkers:  make(map[string]*Worker),
		inboxes:    make(map[string]*Worker),
		waiters:    make(map[string]*waiter),
		closedChan: make(chan struct{}),
		admissions: make(chan *admission, admitQueueSize),
		doneChan:   make(chan struct{}),
	}
	n.logger = cfg.logger.With(slog.String("pool", poolName), slog.String("node", n.id))
	warnContextTimeouts(n.logger, rdb)
	n.ctx, n.cancel = context.WithCancel(context.Background())
	n.bgCtx, n.bgCancel = context.WithCancel(context.Background())
	if n.metrics, err = newMetrics(n); err != nil {
		return nil, fmt.Errorf("%w: metrics: %w", ErrInvalidOption, err)
	}
	if err := n.join(ctx); err != nil {
		rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), releaseGrace)
		defer cancel()
		n.release(rctx)
		return nil, fmt.Errorf("pool: add node to %q: %w", poolName, err)
	}
	return n, nil
}

// join opens the node's maps and streams and starts its loops.
func (n *Node) join(ctx context.Context) error {
	var err error
	mapOpts := []rmap.Option{rmap.WithHashTag(n.pool), rmap.WithLogger(n.logger)}
	if n.shutdown, err = rmap.Join(ctx, n.rdb, shutdownMap, mapOpts...); err != nil {
		return err
	}
	if _, ok := n.shutdown.Get(shutdownFlag); ok {
		return ErrPoolShutdown
	}
	// Register, and settle the pool-wide settings before anything uses
	// them.
	if err := n.settle(ctx); err != nil {
		return err
	}
	if n.workers, err = rmap.Join(ctx, n.rdb, workersMap, mapOpts...); err != nil {
		return err
	}
	if n.slots, err = rmap.Join(ctx, n.rdb, slotsMap, mapOpts...); err != nil {
		return err
	}
	if n.jobStream, err = streaming.NewStream(n.rdb, n.pool, jobStreamName); err != nil {
		return err
	}
	if n.nodeStream, err = streaming.NewStream(n.rdb, n.pool, nodeStreamName(n.id)); err != nil {
		return err
	}
	if n.replies, err = streaming.NewReader(ctx, n.nodeStream, streaming.WithLogger(n.logger)); err != nil {
		return err
	}
	if _, err := n.keepAlive(ctx); err != nil {
		return err
	}
	if !n.cfg.clientOnly {
		n.sink, err = streaming.NewSink(ctx, n.jobStream, routerGroup,
			streaming.WithConsumer(n.id),
			streaming.WithBlockDuration(n.cfg.sinkBlock),
			streaming.WithAckGracePeriod(n.cfg.pendingJobTTL),
			streaming.WithDeleteOnAck(),
			streaming.StartAtOldest(),
			streaming.WithLogger(n.logger))
		if err != nil {
			return err
		}
		if n.inbox, err = streaming.NewMultiReader(n.rdb, streaming.WithLogger(n.logger)); err != nil {
			return err
		}
		n.goroutine(n.routeLoop)
		n.goroutine(n.janitorLoop)
		n.goroutine(n.inboxLoop)
	}
	n.goroutine(n.replyLoop)
	for range admitters {
		n.goroutine(n.admitLoop)
	}
	n.goroutine(n.keepAliveLoop)
	n.goroutine(n.shutdownWatch)
	return nil
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

func (n *Node) goroutine(f func()) {
	n.wg.Add(1)
	go func() {
		defer n.wg.Done()
		f()
	}()
}

// ID returns the node's id, unique in the pool.
func (n *Node) ID() string { return n.id }

// Done returns a channel closed once the node has closed: by Close, by its
// own Shutdown, or because another node shut the pool down. A process
// hosting workers can wait on it to exit with the pool: when it is closed,
// the node's Stop handlers have returned (or WorkerShutdownTTL passed).
func (n *Node) Done() <-chan struct{} { return n.doneChan }

// PoolName returns the name of the node's pool.
func (n *Node) PoolName() string { return n.pool }

// errClosed returns the error for calls on a closed node.
func (n *Node) errClosed() error {
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.shutDown {
		return ErrPoolShutdown
	}
	if n.closed {
		return ErrNodeClosed
	}
	return nil
}

// run runs s, with the pool's keys first, and names errors after op.
func (n *Node) run(ctx context.Context, s *redis.Script, op string, keys []string, args ...any) (any, error) {
	return script.Run(ctx, n.rdb, s, "pool: "+op, keys, args...)
}

// keepAlive records the node's and its workers' keep-alives and tells the
// workers that were declared dead. It returns whether the pool shuts down.
// When the pool had declared this node dead (it was paused or cut off for
// longer than WorkerTTL) or Redis lost the pool's state, answers to the
// node's calls may have been lost: the calls still waiting look at the
// job records instead (resync).
func (n *Node) keepAlive(ctx context.Context) (bool, error) {
	n.mu.Lock()
	args := []any{n.id}
	for id := range n.myWorkers {
		args = append(args, id)
	}
	n.mu.Unlock()
	res, err := n.run(ctx, keepAliveScript, "keep alive",
		[]string{n.lay.alive, n.lay.workers, n.lay.shutdown, n.nodeStream.Key(), n.lay.settings}, args...)
	if err != nil {
		return false, err
	}
	out, _ := res.([]any)
	if len(out) < 2 {
		return false, errors.New("pool: keep alive: short reply")
	}
	for _, v := range out[2:] {
		id, _ := v.(string)
		n.mu.Lock()
		w := n.myWorkers[id]
		n.mu.Unlock()
		if w != nil {
			w.declaredDead()
		}
	}
	switch out[1] {
	case "revived":
		n.logger.Warn("this node was declared dead (no keep-alive for longer than WorkerTTL: paused or cut off); it rejoins, and its waiting calls check their jobs")
		n.metrics.add(ctx, n.metrics.revived, 1)
	case "lost":
		n.logger.Error("pool state lost (Redis restarted empty): every job, worker and setting of the pool is gone; this node rejoins")
		n.metrics.add(ctx, n.metrics.stateLost, 1)
	}
	if out[1] != "ok" {
		// Register again (the record went with the keep-alive) and, if
		// Redis lost them, store the pool's settings again.
		if err := n.settle(ctx); err != nil {
			n.logger.Error("rejoining the pool", slog.Any("error", err))
		}
		n.resync(ctx, out[1] == "lost")
	}
	return out[0] == "1", nil
}

func (n *Node) keepAliveLoop() {
	t := time.NewTicker(n.cfg.workerTTL / 3)
	defer t.Stop()
	for {
		select {
		case <-n.ctx.Done():
			return
		case <-t.C:
		}
		if n.keepAlivePaused.Load() {
			continue
		}
		ctx, cancel := context.WithTimeout(n.ctx, n.cfg.workerTTL/3)
		if _, err := n.keepAlive(ctx); err != nil && n.ctx.Err() == nil {
			n.logger.Warn("keep-alive failed", slog.Any("error", err))
		}
		cancel()
	}
}

// replyLoop hands the answers on the node's stream to the calls waiting
// for them, and deletes what it read.
func (n *Node) replyLoop() {
	events := n.replies.Subscribe()
	for {
		var ev *streaming.Event
		select {
		case <-n.ctx.Done():
			return
		case e, ok := <-events:
			if !ok {
				return
			}
			ev = e
		}
		// Answer every reply already waiting, then delete them with one XDEL.
		batch := drain(ev, events)
		ids := make([]string, len(batch))
		for i, ev := range batch {
			ids[i] = ev.ID
			if ev.Event != evReply {
				continue
			}
			n.answer(ev.Topic, ev.Payload)
		}
		ctx, cancel := context.WithTimeout(n.ctx, 5*time.Second)
		if _, err := n.nodeStream.Remove(ctx, ids...); err != nil && n.ctx.Err() == nil {
			n.logger.Warn("trim node stream", slog.Any("error", err))
		}
		cancel()
	}
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

// waiter is a call waiting for a reply on the node's stream.
type waiter struct {
	ch    chan []byte // capacity 1: the reply
	kind  string      // opDispatch, opStop or opNotify
	key   string
	nonce string // the dispatch's nonce; "" for other calls
}

// Kinds of waiters.
const (
	opDispatch = "dispatch"
	opStop     = "stop"
	opNotify   = "notify"
)

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
		var rec struct {
			N string `json:"n"`
			S string `json:"s"`
		}
		exists := err == nil && json.Unmarshal([]byte(raw), &rec) == nil
		switch w.kind {
		case opDispatch:
			if exists && rec.N == w.nonce {
				if rec.S == stateRunning {
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

// reply answers a request of node to (a no-op for noReply). NOMKSTREAM:
// a node that is gone does not get its stream back.
func (n *Node) reply(ctx context.Context, to, reqID string, payload []byte) {
	if to == noReply {
		return
	}
	err := n.rdb.XAdd(ctx, &redis.XAddArgs{
		Stream: n.lay.nprefix + to, NoMkStream: true,
		Values: []any{streaming.FieldEvent, evReply, streaming.FieldTopic, reqID, streaming.FieldPayload, payload},
	}).Err()
	if err != nil && !errors.Is(err, redis.Nil) {
		n.logger.Warn("reply failed", slog.String("to", to), slog.Any("error", err))
	}
}
