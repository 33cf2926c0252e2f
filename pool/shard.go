package pool

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"runtime"
	"strconv"

	"github.com/cespare/xxhash/v2"
	"github.com/redis/go-redis/v9"
	"github.com/shepherd-go/shepherd/internal/keys"
	"github.com/shepherd-go/shepherd/jumphash"
)

// A pool of n shards (WithShards) is n sub-pools, each a complete pool as
// one of a single shard is: shard 0 has the hash tag {NAME} (the layout
// of an unsharded pool), shard i > 0 has {NAME#i}. On Redis Cluster each
// tag is one slot, so the shards can live on different masters; every
// script still runs on one shard.
//
// Where things live (docs/pool-sharding.md):
//   - a job: the shard of its key (shardOfKey), where DispatchJob,
//     StopJob, NotifyWorker and InspectJob go;
//   - nodes and workers: in every shard. A Node is one part per shard
//     (Node.parts, each a full node of that sub-pool: keep-alive, janitor,
//     router, failover watch), and a Worker is one per shard with the
//     same id and handler, so minimal movement holds in each shard;
//   - the shard count: stored in shard 0's settings when the pool is
//     created (settleShards), fixed for the pool's life;
//   - the pool-wide settings: settled in shard 0, then stored in every
//     shard by each node as it joins;
//   - schedules: the planner's lease is held in shard 0 and mirrored in
//     every shard, so that each shard fences the planner's writes there
//     (schedule_shard.go); tickers: shard 0;
//   - the shutdown flag: set in every shard, watched in shard 0.

// MaxShards is the largest WithShards.
const MaxShards = 256

// settingShards is the settings field, in shard 0, of the shard count
// (absent: 1).
const settingShards = "shards"

// WithShards makes the pool n sub-pools (shards), each in a Redis Cluster
// slot of its own, so that a pool spreads over up to n masters. A key's
// jobs live in one shard, by a hash of the key; every worker serves every
// shard. n is fixed when the pool is created: the first node to join
// stores it, and a node that asks for another count is refused (a node
// without WithShards adopts the pool's). To change it, create a new pool
// and drain the old one (docs/pool-sharding.md). Defaults to 1; n is 1 to
// MaxShards.
//
// Each shard costs every node a keep-alive write every WorkerTTL/3, its
// own blocking reads (three connections of the client's pool, plus three
// pub/sub connections) and its own janitor lease.
func WithShards(n int) NodeOption {
	return func(c *nodeConfig) error {
		if n < 1 || n > MaxShards {
			return fmt.Errorf("%w: shards must be 1 to %d, got %d", ErrInvalidOption, MaxShards, n)
		}
		c.shards, c.set.shards = n, true
		return nil
	}
}

// shardName is the hash tag of shard i of the pool called name.
func shardName(name string, i int) string { return keys.ShardTag(name, i) }

// shardOfKey is the shard of a job's key on a pool of n shards: a jump
// hash, so that a future change of n would move few keys, of a hash of
// the key other than the one that picks its worker in the shard. With
// the same hash the two would be tied (a jump hash over 3 buckets and
// one over 2 agree on every key the first puts in bucket 0 or 1): every
// key of shard 0 would go to the worker of slot 0.
func shardOfKey(key string, n int) int {
	if n <= 1 {
		return 0
	}
	return jumphash.Hash(xxhash.Sum64String(shardSalt+key), n)
}

// shardSalt makes the shard's hash of a key another than the worker's.
const shardSalt = "shard\x00"

// shardsScript stores the shard count in a new pool and returns the
// stored one.
//
//	KEYS[1] settings (shard 0's)
//	ARGV[1] the node's count
var shardsScript = redis.NewScript(`
redis.call("HSETNX", KEYS[1], "` + settingShards + `", ARGV[1])
return redis.call("HGET", KEYS[1], "` + settingShards + `")
`)

// settleShards fixes the node's shard count: the pool's, which the first
// node to join stores; an explicit WithShards must agree with it.
func (n *Node) settleShards(ctx context.Context) error {
	res, err := n.run(ctx, shardsScript, "shards", []string{n.lay.settings}, n.cfg.shards)
	if err != nil {
		return err
	}
	s, _ := res.(string)
	stored, err := parseShards(s)
	if err != nil {
		return err
	}
	if n.cfg.set.shards && stored != n.cfg.shards {
		return fmt.Errorf("%w: Shards: this node sets %d but the pool has %d (fixed when the pool was created)",
			ErrInvalidOption, n.cfg.shards, stored)
	}
	n.cfg.shards = stored
	return nil
}

// restoreShards stores the node's shard count again in a pool whose
// Redis lost its state (it restarted empty): a node joining after it
// would otherwise find none, take the pool for one of a single shard,
// and route keys to shards where they do not live. A pool that stored
// another count meanwhile (such a node came first) is reported, not
// changed: its nodes disagree until restarted.
func (n *Node) restoreShards(ctx context.Context) {
	res, err := n.run(ctx, shardsScript, "shards", []string{n.lay.settings}, n.cfg.shards)
	if err != nil {
		n.logger.Error("storing the pool's shard count again after Redis lost it", slog.Any("error", err))
		return
	}
	if s, _ := res.(string); s != strconv.Itoa(n.cfg.shards) {
		n.logger.Error("the pool's shard count changed while Redis had lost it: this node's differs; restart the pool's nodes",
			slog.Int("shards", n.cfg.shards), slog.String("pool_shards", s))
	}
}

// ShardCount returns the shard count of the pool poolName (WithShards),
// without joining it: 1 for a pool of one shard, made before pools had
// shards, or that Redis holds nothing of (Exists tells). Shard i lives
// under the hash tag {poolName} for i = 0 and {poolName#i} for the
// others. It costs one HGET of shard 0's settings. It returns an error
// wrapping ErrInvalidOption for a nil client or an invalid name.
func ShardCount(ctx context.Context, rdb redis.UniversalClient, poolName string) (int, error) {
	lay, err := poolLayout(rdb, poolName)
	if err != nil {
		return 0, err
	}
	n, err := readShards(ctx, rdb, lay)
	if err != nil {
		return 0, fmt.Errorf("pool: shard count of %q: %w", poolName, err)
	}
	return n, nil
}

// readShards returns the shard count stored with the pool whose shard 0
// has layout lay (1 for a pool that stored none).
func readShards(ctx context.Context, rdb redis.UniversalClient, lay layout) (int, error) {
	s, err := rdb.HGet(ctx, lay.settings, settingShards).Result()
	if errors.Is(err, redis.Nil) {
		return 1, nil
	}
	if err != nil {
		return 0, err
	}
	return parseShards(s)
}

// parseShards reads a stored shard count.
func parseShards(s string) (int, error) {
	v, err := strconv.Atoi(s)
	if err != nil || v < 1 || v > MaxShards {
		return 0, fmt.Errorf("pool: settings: malformed %s %q", settingShards, s)
	}
	return v, nil
}

// shardLayouts returns the layouts of every shard of the pool whose
// shard 0 has layout lay.
func shardLayouts(ctx context.Context, rdb redis.UniversalClient, name string, lay layout) ([]layout, error) {
	s, err := readShards(ctx, rdb, lay)
	if err != nil {
		return nil, err
	}
	lays := []layout{lay}
	for i := 1; i < s; i++ {
		l, err := newLayout(shardName(name, i))
		if err != nil {
			return nil, err
		}
		lays = append(lays, l)
	}
	return lays, nil
}

// blockingReads is how many connections of its client a full node keeps
// busy with blocking reads in each shard (the router's, the workers'
// inbox, the replies); a client-only node keeps one (the replies).
const blockingReads = 3

// checkPoolSize refuses a client whose connection pool is too small for a
// node of a pool of several shards: its blocking reads alone would hold
// every connection, and its other calls would wait for one until their
// deadline.
func checkPoolSize(rdb redis.UniversalClient, cfg nodeConfig) error {
	if cfg.shards < 2 {
		return nil
	}
	reads, kind := blockingReads, "full node"
	if cfg.clientOnly {
		reads, kind = 1, "client-only node"
	}
	size := 0
	switch c := rdb.(type) {
	case *redis.Client:
		size = c.Options().PoolSize
	case *redis.ClusterClient:
		size = c.Options().PoolSize
	default:
		return nil
	}
	if size == 0 {
		size = 10 * runtime.GOMAXPROCS(0) // go-redis's default
	}
	if need := reads*cfg.shards + 2; size < need {
		return fmt.Errorf("%w: the client's PoolSize %d is below the %d connections a %s of %d shards needs (%d blocking reads per shard, plus its calls); "+
			"raise it by %d for every such node that shares the client", ErrInvalidOption, size, need, kind, cfg.shards, reads, reads*cfg.shards)
	}
	return nil
}

// addParts joins shards 1 to S-1 of the pool after n joined shard 0,
// with n's id and its settled settings.
func (n *Node) addParts(ctx context.Context) error {
	n.parts = []*Node{n}
	for i := 1; i < n.cfg.shards; i++ {
		p, err := n.newPart(i)
		if err != nil {
			return err
		}
		n.parts = append(n.parts, p)
		if err := p.join(ctx); err != nil {
			return fmt.Errorf("shard %d: %w", i, err)
		}
	}
	return nil
}

// newPart returns the node's part in shard i, not joined yet.
func (n *Node) newPart(i int) (*Node, error) {
	lay, err := newLayout(shardName(n.name, i))
	if err != nil {
		return nil, err
	}
	cfg := n.cfg
	// Shard 0 settled the pool-wide settings: every shard stores them.
	cfg.set.workerTTL, cfg.set.pendingJobTTL, cfg.set.maxQueuedJobs = true, true, true
	p := newNodeState(n.id, n.name, i, cfg, n.rdb, lay)
	p.started = n.started
	p.home = n
	p.dispatchLim = n.dispatchLim
	p.logger = n.logger.With("shard", i)
	var merr error
	if p.metrics, merr = newMetrics(p); merr != nil {
		return nil, fmt.Errorf("%w: metrics: %w", ErrInvalidOption, merr)
	}
	return p, nil
}

// root returns the node a part belongs to (the node itself for its part
// in shard 0, or on a pool of one shard).
func (n *Node) root() *Node {
	if n.home != nil {
		return n.home
	}
	return n
}

// part returns the node's part in the shard of key.
func (n *Node) part(key string) *Node {
	if len(n.parts) < 2 {
		return n
	}
	return n.parts[shardOfKey(key, len(n.parts))]
}

// eachPart runs f on every part of the node (the node itself on a pool
// of one shard) at once, and joins their errors.
func (n *Node) eachPart(f func(p *Node) error) error {
	if len(n.parts) < 2 {
		return f(n)
	}
	errs := make([]error, len(n.parts))
	each(n.parts, func(i int, p *Node) {
		if err := f(p); err != nil {
			errs[i] = fmt.Errorf("shard %d: %w", i, err)
		}
	})
	return errors.Join(errs...)
}
