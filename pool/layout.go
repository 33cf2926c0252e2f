package pool

import (
	"fmt"
	"strings"

	"github.com/redis/go-redis/v9"
	"github.com/shepherd-go/shepherd/internal/keys"
	"github.com/shepherd-go/shepherd/internal/redisutil"
	"github.com/shepherd-go/shepherd/rmap"
)

// Names of the pool's Redis structures. All share the hash tag {pool}, so
// a pool lives in one Redis Cluster slot and its scripts may touch any of
// them; see internal/keys for the layout.
const (
	jobStreamName = "jobs"     // start events waiting to be routed
	routerGroup   = "routers"  // the job stream's consumer group
	workersMap    = "workers"  // replicated: worker id → info
	slotsMap      = "slots"    // replicated: slot number → worker id, and "size"
	shutdownMap   = "shutdown" // replicated: the shutdown flag
	sizeField     = "size"     // slotsMap: the jump-hash table size; only grows

	shutdownFlag = "shutdown" // shutdownMap: set by Shutdown
)

// Stream names for a worker's and a node's own streams. Worker and node ids
// are hex, so the names cannot collide with jobStreamName.
func workerStreamName(id string) string { return "w-" + id }
func nodeStreamName(id string) string   { return "n-" + id }

// layout holds the Redis keys the pool's scripts use.
type layout struct {
	space     keys.Space
	jobs      string // hash: key → job record (JSON)
	payloads  string // hash: key → payload
	alive     string // hash: "w:<id>" / "n:<id>" → last keep-alive, ms of Redis TIME
	janitor   string // string: the janitor lease
	settings  string // hash: the pool-wide settings (settings.go)
	nodes     string // hash: node id → node record (JSON)
	withdrawn string // zset: nonces of withdrawn DispatchJobs by when (ms): the ledger (member.Withdraw)
	counters  string // hash: counter name (counter* in wire.go) → count
	recovery  string // list: the janitor's latest recoveries (JSON), newest first
	history   string // list: the janitor's samples of the pool (history.go), newest first
	jobStream string // the job stream's key
	workers   string // the workers map's hash (read by scripts)
	slots     string // the slots map's hash (read by scripts)
	slotsRev  string // the slots map's revision hash (field rmap.RevField)
	shutdown  string // the shutdown map's hash (read by scripts)
	wprefix   string // a worker stream's key is wprefix + worker id
	nprefix   string // a node stream's key is nprefix + node id
	acked     string // string: written by confirmations on the replicas (WithReplicas, replica.Confirm); expires after a minute
	plans     string // set: the names of the pool's schedules (schedule.go)
	tickers   string // set: the names of the pool's tickers (ticker.go)
	nodeIDs   string // hash: WithNodeID's id → the id of the node holding it (identity.go)
}

// plan returns the key of schedule name's hash: its settings, lease and
// last outcome.
func (l layout) plan(name string) string { return l.space.Key(keys.KindPool, "plan:"+name) }

// planKeys returns the key of the hash of the jobs schedule name started
// or adopted: key → digest of the payload it last applied.
func (l layout) planKeys(name string) string { return l.space.Key(keys.KindPool, "plankeys:"+name) }

// ticker returns the key of ticker name's hash.
func (l layout) ticker(name string) string { return l.space.Key(keys.KindPool, "ticker:"+name) }

// poolLayout checks the arguments every entry point takes, a client and a
// pool name, and returns the pool's layout, or an error wrapping
// ErrInvalidOption.
func poolLayout(rdb redis.UniversalClient, pool string) (layout, error) {
	if redisutil.IsNil(rdb) {
		return layout{}, fmt.Errorf("%w: nil Redis client", ErrInvalidOption)
	}
	if pool == "" || strings.ContainsAny(pool, "}#") {
		return layout{}, fmt.Errorf("%w: pool name %q must be non-empty and must not contain '}' or '#' (which names a pool's shards)", ErrInvalidOption, pool)
	}
	lay, err := newLayout(pool)
	if err != nil {
		return layout{}, fmt.Errorf("%w: %w", ErrInvalidOption, err)
	}
	return lay, nil
}

func newLayout(pool string) (layout, error) {
	s, err := keys.New(pool)
	if err != nil {
		return layout{}, err
	}
	// The replicated maps' keys, as rmap names them: the scripts read
	// them (never write them) atomically with the pool's own keys.
	var maps [3]rmap.Layout
	for i, name := range []string{workersMap, slotsMap, shutdownMap} {
		if maps[i], err = rmap.KeysOf(pool, name); err != nil {
			return layout{}, err
		}
	}
	return layout{
		space:     s,
		jobs:      s.Key(keys.KindPool, "jobs"),
		payloads:  s.Key(keys.KindPool, "payloads"),
		alive:     s.Key(keys.KindPool, "alive"),
		janitor:   s.Key(keys.KindPool, "janitor"),
		settings:  s.Key(keys.KindPool, "settings"),
		nodes:     s.Key(keys.KindPool, "nodes"),
		withdrawn: s.Key(keys.KindPool, "withdrawals"), // a hash named "withdrawn" before the ledger was a zset
		counters:  s.Key(keys.KindPool, "counters"),
		recovery:  s.Key(keys.KindPool, "recoveries"),
		history:   s.Key(keys.KindPool, "history"),
		jobStream: s.Key(keys.KindStream, jobStreamName),
		workers:   maps[0].Hash,
		slots:     maps[1].Hash,
		slotsRev:  maps[1].Rev,
		shutdown:  maps[2].Hash,
		wprefix:   s.Key(keys.KindStream, workerStreamName("")),
		nprefix:   s.Key(keys.KindStream, nodeStreamName("")),
		acked:     s.Key(keys.KindPool, "acked"),
		plans:     s.Key(keys.KindPool, "plans"),
		tickers:   s.Key(keys.KindPool, "tickers"),
		nodeIDs:   s.Key(keys.KindPool, "nodeids"),
	}, nil
}

// recordKeys are the KEYS[1..3] of the scripts that read a job record and
// check its worker: jobs, payloads, workers map.
func (l layout) recordKeys() []string { return []string{l.jobs, l.payloads, l.workers} }
