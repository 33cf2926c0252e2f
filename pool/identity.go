package pool

import (
	"context"
	"encoding/json"
	"fmt"
	"strconv"
	"time"

	"github.com/cespare/xxhash/v2"
	"github.com/redis/go-redis/v9"
	"github.com/shepherd-go/shepherd/internal/member"
)

// A stable identity (WithNodeID) lets a node restart without moving its
// jobs, as Kafka's static membership does (group.instance.id and the
// session timeout): the n-th worker of node X always has the id
// stableWorkerID(X, n), so a restarted process's workers take back their
// slots and find their jobs' records. Close of such a node leaves its
// workers in the pool, "restarting until" now + the grace (a field r:<id>
// of the keep-alive hash, Redis's clock); a node that dies leaves them
// for WorkerTTL + the grace (the grace is in the worker's entry of the
// workers map). The janitor reaps them only then, and recovers their jobs
// as it would a dead worker's.
//
// The pool's record of identities (layout.identities: identity → the id
// of the node holding it, new at every AddNode) refuses a second live
// process of one identity (ErrNodeIDInUse) and fences a former holder: a
// worker's entry in the workers map names the node that registered it,
// and the keep-alive, claim and start scripts accept a worker's call only
// from that node (worker_of). A paused former holder that thaws after its
// successor took its workers over is told its workers are dead, as any
// frozen process, and stops its stale copies; the successor restarted
// every job in a new generation, which fences whatever else it tries.

// DefaultRestartGrace is WithRestartGrace's default.
const DefaultRestartGrace = 30 * time.Second

// maxNodeIDSize bounds WithNodeID's identity, in bytes.
const maxNodeIDSize = 128

// WithNodeID gives the node a stable identity in its pool, id, so that a
// restart moves none of its jobs: the process that comes back with the
// same id within the restart grace (WithRestartGrace) gets its workers'
// ids, slots and jobs back, and each job starts there once more, without
// starting anywhere else meanwhile. The n-th AddWorker of the node (the
// lowest index not in use by its live workers) gets the same worker id at
// every restart.
//
// With it, Close keeps the node's place: its workers stop their jobs
// (Stop runs) but hand none over, and the jobs wait for the restart; past
// the grace they move to the other workers, as a dead worker's do. A node
// that dies keeps its place for WorkerTTL + the grace. Leave, or
// RemoveWorker before Close, takes a node out for good and moves its jobs
// at once (scaling down). The trade: during a restart its jobs run
// nowhere, for up to the grace, rather than moving twice.
//
// While a node with the id lives (its keep-alive within WorkerTTL),
// AddNode with the same id fails with ErrNodeIDInUse: after a crash, the
// restarted process gets the id once the dead one's keep-alive lapses
// (retry AddNode). id is 1 to 128 letters, digits, '.', '_', '-' or ':'.
// A client-only node takes none. Defaults to none: every AddNode is a new
// member, and Close moves its jobs.
func WithNodeID(id string) NodeOption {
	return func(c *nodeConfig) error {
		if err := checkNodeID(id); err != nil {
			return err
		}
		c.identity = id
		return nil
	}
}

// WithRestartGrace sets how long the pool keeps a node's place
// (WithNodeID) after its Close, or after its WorkerTTL ran out when it
// died: its jobs wait for it that long, then move. It must be positive,
// and needs WithNodeID. Defaults to DefaultRestartGrace (30s).
func WithRestartGrace(d time.Duration) NodeOption {
	return func(c *nodeConfig) error {
		if err := positive("RestartGrace", d); err != nil {
			return err
		}
		c.restartGrace, c.graceSet = d, true
		return nil
	}
}

func checkNodeID(id string) error {
	if id == "" || len(id) > maxNodeIDSize {
		return fmt.Errorf("%w: node id must be 1 to %d bytes, got %d", ErrInvalidOption, maxNodeIDSize, len(id))
	}
	for _, r := range id {
		ok := r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '.' || r == '_' || r == '-' || r == ':'
		if !ok {
			return fmt.Errorf("%w: node id %q: only letters, digits, '.', '_', '-' and ':'", ErrInvalidOption, id)
		}
	}
	return nil
}

// checkIdentity checks the options that go with WithNodeID.
func (c *nodeConfig) checkIdentity() error {
	if c.graceSet && c.identity == "" {
		return fmt.Errorf("%w: WithRestartGrace needs WithNodeID", ErrInvalidOption)
	}
	if c.identity != "" && c.clientOnly {
		return fmt.Errorf("%w: a client-only node takes no WithNodeID (it hosts no workers)", ErrInvalidOption)
	}
	return nil
}

// stableWorkerID returns the id of the index-th worker of the node with
// identity id: 16 hex digits, like a random id, so that stream names stay
// as they are.
func stableWorkerID(pool, id string, index int) string {
	return fmt.Sprintf("%016x", xxhash.Sum64String(pool+"\x00"+id+"\x00"+strconv.Itoa(index)))
}

// newWorkerID returns a new worker's id and index: random, with index
// -1, for a node without identity; else the lowest index the node's
// workers do not use, which it reserves until freeIndex.
func (n *Node) newWorkerID() (string, int) {
	if n.cfg.identity == "" {
		return newID(), -1
	}
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.indexes == nil {
		n.indexes = make(map[int]bool)
	}
	i := 0
	for n.indexes[i] {
		i++
	}
	n.indexes[i] = true
	return stableWorkerID(n.pool, n.cfg.identity, i), i
}

// freeIndex gives a worker's index back (a failed AddWorker, RemoveWorker).
func (n *Node) freeIndex(index int) {
	if index < 0 {
		return
	}
	n.mu.Lock()
	delete(n.indexes, index)
	n.mu.Unlock()
}

// fence is what the claim and start scripts check the worker's entry in
// the workers map against (worker_of): this node's id for a worker with a
// stable id, which another process may hold too; "" (any) for a random
// one.
func (w *Worker) fence() string {
	if w.index < 0 {
		return ""
	}
	return w.node.id
}

// ours reports whether the workers map (this node's copy) still names
// this node for the worker: always for a random id; for a stable one,
// until a restarted process with the node's id took it over, whose slot,
// entry and stream a leaving former holder must leave alone.
func (w *Worker) ours() bool {
	if w.index < 0 {
		return true
	}
	raw, ok := w.node.workers.Get(w.id)
	if !ok {
		return true // gone already: deleting again is harmless
	}
	var info workerInfo
	return json.Unmarshal([]byte(raw), &info) != nil || info.Node == w.node.id
}

// workerLua defines worker_of(workers, wid, node): whether the worker wid
// is in the workers map (at key workers) and, unless node is "", was
// registered by node.
const workerLua = `
local function worker_of(workers, wid, node)
  local info = redis.call("HGET", workers, wid)
  if not info then return false end
  if node == "" then return true end
  local ok, v = pcall(cjson.decode, info)
  return ok and type(v) == "table" and v.node == node
end
`

// claimIdentity records this node as the holder of its identity, or
// returns ErrNodeIDInUse while another live node holds it.
func (n *Node) claimIdentity(ctx context.Context) error {
	if n.cfg.identity == "" {
		return nil
	}
	res, err := n.run(ctx, claimIdentityScript, "claim node id", []string{n.lay.nodeIDs, n.lay.alive},
		n.cfg.identity, n.id, n.cfg.workerTTL.Milliseconds())
	if err != nil {
		return err
	}
	if holder, _ := res.(string); holder != "" {
		return fmt.Errorf("%w: %q is held by the live node %s (retry once its keep-alive lapses, within WorkerTTL %v)",
			ErrNodeIDInUse, n.cfg.identity, holder, n.cfg.workerTTL)
	}
	return nil
}

// claimIdentityScript takes an identity for a node unless another node
// that holds it is live (its keep-alive within the TTL, Redis's clock).
//
//	KEYS[1] identities, KEYS[2] alive
//	ARGV[1] identity, ARGV[2] node id, ARGV[3] worker TTL in ms
//
// Returns "" once the node holds it, else the live holder's id.
var claimIdentityScript = redis.NewScript(member.LuaClock + `
local holder = redis.call("HGET", KEYS[1], ARGV[1])
if holder and holder ~= ARGV[2] and not lapsed(redis.call("HGET", KEYS[2], "n:" .. holder), now_ms(), ARGV[3]) then
  return holder
end
redis.call("HSET", KEYS[1], ARGV[1], ARGV[2])
return ""
`)

// releaseIdentity forgets the node's identity if it still holds it
// (Leave): its workers are gone for good.
func (n *Node) releaseIdentity(ctx context.Context) error {
	if n.cfg.identity == "" {
		return nil
	}
	_, err := n.run(ctx, releaseIdentityScript, "release node id", []string{n.lay.nodeIDs}, n.cfg.identity, n.id)
	return err
}

// releaseIdentityScript deletes an identity held by a node.
//
//	KEYS[1] identities
//	ARGV[1] identity, ARGV[2] node id
//
// Returns 1 if it was deleted.
var releaseIdentityScript = redis.NewScript(`
if redis.call("HGET", KEYS[1], ARGV[1]) == ARGV[2] then return redis.call("HDEL", KEYS[1], ARGV[1]) end
return 0
`)

// Leave takes the node out of the pool for good, as Close does for a node
// without WithNodeID: its workers stop their jobs, which start on the
// other workers at once, and free their slots; its identity is released.
// Use it to scale down a node with WithNodeID. It is idempotent, and
// shares Close's result: after Close, Leave returns at once.
func (n *Node) Leave(ctx context.Context) error {
	for _, p := range n.partsOrSelf() {
		p.mu.Lock()
		p.leaving = true
		p.mu.Unlock()
	}
	return n.Close(ctx)
}
