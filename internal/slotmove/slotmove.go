// Package slotmove moves one hash slot of a Redis Cluster, with its keys,
// from the master that serves it to another, as `redis-cli --cluster
// reshard` moves each slot: CLUSTER SETSLOT IMPORTING on the new master
// and MIGRATING on the old, then GETKEYSINSLOT and MIGRATE until no key
// is left, then SETSLOT NODE on the new master, the old one and every
// other master. The shepherd CLI's `queue move-shard` and `pool
// move-shard` (cmd/shepherd/move_shard.go) and the test cluster
// (internal/rediscluster) use it.
//
// While the slot moves, Redis refuses the scripts of shepherd's units on
// it (internal/script: the slot guard), so a move pauses the unit on that
// slot; keep it short with a large batch.
package slotmove

import (
	"context"
	"errors"
	"fmt"
	"net"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"
)

// Move is one slot's move.
type Move struct {
	Slot int
	// From and To are clients of the master that serves the slot and of
	// the one it moves to; ToAddr is To's address as the cluster knows
	// it (the host and port MIGRATE dials).
	From, To *redis.Client
	ToAddr   string
	// Others are clients of the cluster's other masters, told the new
	// owner at the end (the cluster bus would spread it too, later).
	Others []*redis.Client
	// Batch is how many keys a MIGRATE moves (redis-cli's
	// --cluster-pipeline; 10 there). At least 1.
	Batch int
	// Pace is a pause between two MIGRATEs (0: none), for tests that hold
	// the slot open.
	Pace time.Duration
	// Username and Password authenticate MIGRATE's connection to To, when
	// the cluster needs it.
	Username, Password string
	// Progress, if set, is called after each MIGRATE with the keys moved
	// so far.
	Progress func(moved int)
}

// ErrBadMove is returned (wrapped) for a Move that cannot be made.
var ErrBadMove = errors.New("slotmove: bad move")

// Slots is the number of hash slots of a Redis Cluster.
const Slots = 16384

// migrateTimeout is MIGRATE's own timeout (ms) for one batch.
const migrateTimeout = 10000

// Run moves the slot and returns how many keys it moved. A move that
// fails midway leaves the slot open (MIGRATING on From, IMPORTING on To),
// as redis-cli does: run it again to finish it, or `redis-cli --cluster
// fix`.
func (m Move) Run(ctx context.Context) (int, error) {
	if m.Slot < 0 || m.Slot >= Slots {
		return 0, fmt.Errorf("%w: slot %d: want 0 to %d", ErrBadMove, m.Slot, Slots-1)
	}
	if m.Batch < 1 {
		return 0, fmt.Errorf("%w: %d keys a MIGRATE: want at least 1", ErrBadMove, m.Batch)
	}
	if m.From == nil || m.To == nil {
		return 0, fmt.Errorf("%w: no client of the old or the new master", ErrBadMove)
	}
	host, port, err := net.SplitHostPort(m.ToAddr)
	if err != nil {
		return 0, fmt.Errorf("%w: the new master's address %q: %w", ErrBadMove, m.ToAddr, err)
	}
	fromID, err := m.From.Do(ctx, "CLUSTER", "MYID").Text()
	if err != nil {
		return 0, fmt.Errorf("slotmove: CLUSTER MYID of the old master: %w", err)
	}
	toID, err := m.To.Do(ctx, "CLUSTER", "MYID").Text()
	if err != nil {
		return 0, fmt.Errorf("slotmove: CLUSTER MYID of the new master: %w", err)
	}
	if fromID == toID {
		return 0, nil
	}
	setslot := func(c *redis.Client, args ...any) error {
		return c.Do(ctx, append([]any{"CLUSTER", "SETSLOT", m.Slot}, args...)...).Err()
	}
	if err := setslot(m.To, "IMPORTING", fromID); err != nil {
		return 0, fmt.Errorf("slotmove: slot %d: IMPORTING on the new master: %w", m.Slot, err)
	}
	if err := setslot(m.From, "MIGRATING", toID); err != nil {
		return 0, fmt.Errorf("slotmove: slot %d: MIGRATING on the old master: %w", m.Slot, err)
	}
	moved := 0
	for {
		keys, err := m.From.ClusterGetKeysInSlot(ctx, m.Slot, m.Batch).Result()
		if err != nil {
			return moved, fmt.Errorf("slotmove: slot %d: GETKEYSINSLOT: %w", m.Slot, err)
		}
		if len(keys) == 0 {
			break
		}
		args := []any{"MIGRATE", host, port, "", 0, migrateTimeout}
		switch {
		case m.Username != "":
			args = append(args, "AUTH2", m.Username, m.Password)
		case m.Password != "":
			args = append(args, "AUTH", m.Password)
		}
		args = append(args, "KEYS")
		for _, k := range keys {
			args = append(args, k)
		}
		if err := m.From.Do(ctx, args...).Err(); err != nil {
			return moved, fmt.Errorf("slotmove: slot %d: MIGRATE of %d keys: %w", m.Slot, len(keys), err)
		}
		moved += len(keys)
		if m.Progress != nil {
			m.Progress(moved)
		}
		if m.Pace > 0 {
			select {
			case <-ctx.Done():
				return moved, ctx.Err()
			case <-time.After(m.Pace):
			}
		}
	}
	// The new owner first, then the old one (which then answers MOVED),
	// then the others; the bus spreads the new epoch too. An old owner
	// left with no slot may have learnt it from the bus already and
	// become a replica of the new one (cluster-allow-replica-migration,
	// on by default), which refuses SETSLOT: it knows.
	for i, c := range append([]*redis.Client{m.To, m.From}, m.Others...) {
		if err := setslot(c, "NODE", toID); err != nil {
			if i > 0 && strings.Contains(err.Error(), "only with masters") {
				continue
			}
			return moved, fmt.Errorf("slotmove: slot %d: SETSLOT NODE on master %d of the move: %w", m.Slot, i, err)
		}
	}
	return moved, nil
}
