package pool

import (
	"context"
	"errors"
	"fmt"

	"github.com/redis/go-redis/v9"

	"github.com/shepherd-go/shepherd/internal/keys"
	"github.com/shepherd-go/shepherd/internal/redisutil"
	"github.com/shepherd-go/shepherd/internal/script"
)

// ErrInUse is returned by Delete while nodes of the pool are live (their
// keep-alives within WorkerTTL), unless DeleteEvenIfLive is given.
var ErrInUse = errors.New("pool: in use by live nodes")

// DeleteOption configures Delete.
type DeleteOption func(*deleteConfig)

type deleteConfig struct{ evenIfLive bool }

// DeleteEvenIfLive deletes the pool even while nodes are in it: their
// jobs keep running where they are, unrecorded, until the nodes close;
// prefer Node.Shutdown, which stops every job first. Defaults to
// refusing (ErrInUse).
func DeleteEvenIfLive() DeleteOption { return func(c *deleteConfig) { c.evenIfLive = true } }

// Delete removes every key of the pool called name from Redis: its
// settings, slot table, job records and payloads, streams and maps. It
// returns how many keys it removed (0 for a pool Redis does not hold).
// It refuses with ErrInUse, removing nothing, while a node of the pool is
// live, unless DeleteEvenIfLive is given: a pool whose nodes are all
// closed or dead (a dormant pool, which keeps its jobs for the next
// worker) is what it is for. Node.Shutdown is the way to end a running
// pool. A queue of the same name keeps its keys.
//
// It SCANs the pool's keys (every master of a Cluster): it costs O(keys
// in Redis), for operators and tests, not for a hot path.
func Delete(ctx context.Context, rdb redis.UniversalClient, name string, opts ...DeleteOption) (int, error) {
	var cfg deleteConfig
	for _, o := range opts {
		o(&cfg)
	}
	lay, err := poolLayout(rdb, name)
	if err != nil {
		return 0, fmt.Errorf("pool: delete: %w", err)
	}
	if !cfg.evenIfLive {
		// The nodes whose keep-alive is within the stored WorkerTTL, as
		// Shutdown waits for them: not Inspect, which reads every job.
		set, err := readSettings(ctx, rdb, lay)
		if err != nil {
			return 0, fmt.Errorf("pool: delete: %w", err)
		}
		res, err := script.Run(ctx, rdb, liveNodesScript, "pool: delete: live nodes", []string{lay.alive}, set.workerTTL.Milliseconds())
		if err != nil {
			return 0, fmt.Errorf("pool: delete: %w", err)
		}
		if live, _ := res.([]any); len(live) > 0 {
			return 0, fmt.Errorf("%w: %q has %d live nodes (close them, or Shutdown)", ErrInUse, name, len(live))
		}
	}
	lays, err := shardLayouts(ctx, rdb, name, lay)
	if err != nil {
		return 0, fmt.Errorf("pool: delete: %w", err)
	}
	total := 0
	// Shard 0, whose settings hold the shard count, last.
	for i := len(lays) - 1; i >= 0; i-- {
		n, err := unlinkPool(ctx, rdb, lays[i].space)
		total += n
		if err != nil {
			return total, err
		}
	}
	return total, nil
}

// poolKinds are the kinds of key a pool keeps (internal/keys): its own,
// and those of the streams and maps it runs on. A queue's kind is not
// one: a queue may share the pool's name, and so its hash tag.
var poolKinds = []string{keys.KindPool, keys.KindStream, keys.KindStreamLease, keys.KindStreamAlive,
	keys.KindMap, keys.KindMapRev}

// unlinkPool unlinks every key of the pool of space sp, and says how
// many.
func unlinkPool(ctx context.Context, rdb redis.UniversalClient, sp keys.Space) (int, error) {
	total := 0
	for _, kind := range poolKinds {
		n, err := redisutil.UnlinkCount(ctx, rdb, sp.KindPattern(kind))
		total += n
		if err != nil {
			return total, fmt.Errorf("pool: deleting its keys: %w", err)
		}
	}
	return total, nil
}
