package pool

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/shepherd-go/shepherd/internal/group"
	"github.com/shepherd-go/shepherd/internal/script"
	"github.com/shepherd-go/shepherd/limit"
	"github.com/shepherd-go/shepherd/rmap"
	"github.com/shepherd-go/shepherd/streaming"
)

// Node is a process's membership in a pool. A full node routes jobs to
// workers and hosts workers; a client-only node (WithClientOnly) only
// dispatches, stops and notifies. A Node is safe for concurrent use.
type Node struct {
	id      string
	started time.Time // when AddNode was called, by this process's clock
	pool    string    // the hash tag of the node's shard: name, or name#i (shard.go)
	name    string    // the pool's name
	shard   int       // the shard this node (part) is in
	parts   []*Node   // WithShards: the node's part in every shard, parts[0] == n; nil on a pool of one shard
	home    *Node     // on a part in shard i > 0: the node it is part of; nil on the node itself
	rdb     redis.UniversalClient
	cfg     nodeConfig
	lay     layout
	logger  *slog.Logger

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

	// The node's goroutines, in groups with one owner each (stop): loops
	// run until the node stops, and stop waits for them; background holds
	// the withdrawals of failed dispatches, which stop waits for up to its
	// ctx; stops holds the Stop handlers that outlived their deadline,
	// which stop waits for up to WorkerShutdownTTL more, then reports;
	// watchers holds the shutdown watcher, which may run stop itself:
	// Close and Shutdown wait for it once stop has returned.
	loops, background, stops, watchers *group.Group
	ctx                                context.Context // loops.Context(): cancelled when the node stops

	runs runs // the runs of keys on this node's workers: every Start and Stop holds its key here

	mu           sync.Mutex
	closed       bool
	shutDown     bool // closed because the pool shut down
	myWorkers    map[string]*Worker
	waiters      map[string]*waiter // request id → the call waiting for its reply
	admissions   chan *admission    // DispatchJob → admitLoop
	admitting    atomic.Int64       // admissions under way, queued ones included
	startedCalls chan *startedCall  // a worker's started jobs → startedLoop
	recording    atomic.Int64       // started batches being recorded, queued ones included
	replicasUp   atomic.Int64       // the master's connected replicas at watchLoop's last read, plus one (0: not read yet)
	dispatchLim  *limit.Blocking    // WithDispatchLimit's; nil without
	leaving      bool               // Leave: a node with WithNodeID closes for good
	shuttingDown atomic.Bool        // Shutdown sets the flags: the node's watchers leave the stopping to it
	indexes      map[int]bool       // WithNodeID: the worker indexes in use (identity.go)
	reclaims     reclaims           // WithNodeID: what a walk found for the workers not added yet (restart.go)
	closeOnce    sync.Once
	closeErr     error
	closedChan   chan struct{}
	doneChan     chan struct{} // closed once stop has finished: Done

	test    testSignals
	metrics *metrics
}

// testSignals are the counters and hooks that tests read or set; the
// node only updates the counters (an atomic add) and calls a hook that is
// set.
type testSignals struct {
	keepAlivePaused  atomic.Bool     // simulate a frozen process: no keep-alives
	startBatches     atomic.Int64    // start batches of more than one job
	releasesRouted   atomic.Int64    // released jobs handed straight to their new owner
	staleRunsStopped atomic.Int64    // stale runs a Start stopped first (another worker's, declared dead)
	claimsSkipped    atomic.Int64    // starts claimed by their admission, started without a claim
	admitHook        func(ran bool)  // runs before and after an admission pipeline
	leasesPaused     atomic.Bool     // simulate a frozen process: schedules and tickers make no call
	crashed          atomic.Bool     // simulate a dead process: leases are not released
	flagSet          func(shard int) // runs after Shutdown set a shard's flag
	recoverStep      atomic.Int64    // records a recover step reads (0: recoverChunk); set, a pass takes one step
	reportWait       atomic.Int64    // how long a keep-alive waits for fresh reports, ns (0: nodeConfig.reportWait)
	reclaimWalks     atomic.Int64    // walks through the job records for a restarted node's workers (on the root node)
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
func AddNode(ctx context.Context, rdb redis.UniversalClient, poolName string, opts ...NodeOption) (*Node, error) {
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
	if err := cfg.checkReplicas(); err != nil {
		return nil, err
	}
	if err := cfg.checkIdentity(); err != nil {
		return nil, err
	}
	// Before anything is written: a refused first node must not fix the
	// shard count of a pool it never joined. (A node that adopts the
	// pool's count is checked once it has read it, in join.)
	if err := checkPoolSize(rdb, cfg); err != nil {
		return nil, err
	}
	n := newNodeState(newID(), poolName, 0, cfg, rdb, lay)
	if n.dispatchLim, err = cfg.newDispatchLimiter(); err != nil {
		return nil, err
	}
	n.logger = cfg.logger.With(slog.String("pool", poolName), slog.String("node", n.id))
	if cfg.identity != "" {
		n.logger = n.logger.With(slog.String("node_id", cfg.identity))
	}
	warnContextTimeouts(n.logger, rdb)
	if n.metrics, err = newMetrics(n); err != nil {
		return nil, fmt.Errorf("%w: metrics: %w", ErrInvalidOption, err)
	}
	err = n.join(ctx)
	if err == nil && n.cfg.shards > 1 {
		err = n.addParts(ctx)
	}
	if err != nil {
		rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), releaseGrace)
		defer cancel()
		for _, p := range n.partsOrSelf()[1:] {
			p.abandon(rctx)
		}
		n.abandon(rctx)
		return nil, fmt.Errorf("pool: add node to %q: %w", poolName, err)
	}
	return n, nil
}

// newNodeState returns a node (or a part of one in shard) that has not
// joined yet.
func newNodeState(id, name string, shard int, cfg nodeConfig, rdb redis.UniversalClient, lay layout) *Node {
	n := &Node{
		id: id, started: time.Now(), pool: shardName(name, shard), name: name, shard: shard,
		rdb: rdb, cfg: cfg, lay: lay,
		myWorkers:    make(map[string]*Worker),
		inboxes:      make(map[string]*Worker),
		waiters:      make(map[string]*waiter),
		closedChan:   make(chan struct{}),
		admissions:   make(chan *admission, admitQueueSize),
		startedCalls: make(chan *startedCall, startedQueueSize),
		doneChan:     make(chan struct{}),
	}
	n.loops = group.New(context.Background())
	n.ctx = n.loops.Context()
	n.background = group.New(context.Background())
	n.stops = group.New(context.Background())
	n.watchers = group.New(n.ctx)
	return n
}

// abandon undoes a join that failed: it stops what the node started and
// deletes what it wrote.
func (n *Node) abandon(ctx context.Context) {
	n.loops.Stop()
	n.loops.Wait()
	n.watchers.Stop()
	n.watchers.Wait()
	n.teardown(ctx)
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
	if err := n.settle(ctx, false); err != nil {
		return err
	}
	if n.home == nil {
		if err := n.settleShards(ctx); err != nil {
			return err
		}
		if err := checkPoolSize(n.rdb, n.cfg); err != nil {
			return err
		}
	}
	if err := n.claimIdentity(ctx); err != nil {
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
			streaming.WithAckGracePeriod(n.cfg.routerAckGrace()),
			streaming.WithDeleteOnAck(),
			// One keep-alive says whether a node lives: the sink judges
			// its routers by the nodes' keep-alives and takes a dead
			// node's job events over at once.
			streaming.WithMembers(n.lay.alive, "n:", n.cfg.workerTTL),
			streaming.StartAtOldest(),
			streaming.WithLogger(n.logger))
		if err != nil {
			return err
		}
		if n.inbox, err = streaming.NewMultiReader(n.rdb, streaming.WithLogger(n.logger)); err != nil {
			return err
		}
		n.loops.Go(n.routeLoop)
		n.loops.Go(n.janitorLoop)
		n.loops.Go(n.inboxLoop)
	}
	n.loops.Go(n.replyLoop)
	for range admitters {
		n.loops.Go(n.admitLoop)
	}
	n.loops.Go(n.startedLoop)
	n.loops.Go(n.keepAliveLoop)
	n.watchers.Go(n.shutdownWatch)
	n.loops.Go(n.watchLoop)
	return nil
}

// ID returns the node's id, unique in the pool and new at every AddNode
// (with WithNodeID too: the identity and the workers' ids are what a
// restart keeps).
func (n *Node) ID() string { return n.id }

// Done returns a channel closed once the node has closed: by Close, by its
// own Shutdown, or because another node shut the pool down. A process
// hosting workers can wait on it to exit with the pool: when it is closed,
// the node's Stop handlers have returned (or WorkerShutdownTTL passed).
func (n *Node) Done() <-chan struct{} { return n.doneChan }

// PoolName returns the name of the node's pool.
func (n *Node) PoolName() string { return n.name }

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

// releaseGrace bounds the cleanup of a node whose AddNode failed: it runs
// after ctx may have ended (Redis unreachable), and must not hold the
// caller much past its deadline. What it could not delete is an empty
// stream and a keep-alive that reads as dead.
const releaseGrace = 250 * time.Millisecond

// warnContextTimeouts warns when rdb ignores context deadlines on socket
// I/O: go-redis applies them only with ContextTimeoutEnabled, and without
// it a call against an unresponsive Redis returns after the client's read
// or write timeout, however short its ctx.
func warnContextTimeouts(logger *slog.Logger, rdb redis.UniversalClient) {
	enabled := true
	switch c := rdb.(type) {
	case *redis.Client:
		enabled = c == nil || c.Options().ContextTimeoutEnabled
	case *redis.ClusterClient:
		enabled = c == nil || c.Options().ContextTimeoutEnabled
	}
	if !enabled {
		logger.Warn("the Redis client ignores context deadlines (ContextTimeoutEnabled is off): calls may outlive their ctx while Redis hangs")
	}
}

// newID returns a random 16-hex-digit id for nodes, workers, nonces and
// requests.
func newID() string {
	var b [8]byte
	_, _ = rand.Read(b[:])
	return hex.EncodeToString(b[:])
}
