package queue

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync/atomic"

	"github.com/shepherd-go/shepherd/internal/keys"
	"github.com/shepherd-go/shepherd/jumphash"
)

// A queue of n shards (WithShards) keeps n copies of its key layout, one
// per hash tag: shard 0 is "NAME" (the layout of an unsharded queue),
// shard i > 0 is "NAME#i". On Redis Cluster each tag is one slot, so the
// shards can live on different masters; every script runs on one shard.
//
// Where things live:
//   - a tenant's registration, counters, rate, pause and tasks: its shard
//     (shardOfKey of the tenant id), so caps, rates, fairness and pause
//     stay exact in one script;
//   - a task without a tenant: its batch's shard (the batch's first
//     task's), else its deduplication key's, else its caller's id's
//     (shardOfKey), else the shard whose turn it is (placeTask: the
//     shards take turns by submitScript call); the ids the package makes
//     carry their shard;
//   - the untenanted capacity: split between the shards (share);
//   - the queue-wide settings: stored in shard 0 (the home shard), which
//     settles them, and copied to every shard by each process as it
//     joins (the scripts of a shard read them there); the queue's pause
//     and rate are written to every shard (the rate split evenly);
//   - processes: every process keeps alive in every shard, and the
//     reaper of each shard judges them there;
//   - a schedule: the shard of the tasks it makes (its tenant's, else its
//     name's);
//   - dead letters, finished lists, history: per shard; readers add up;
//   - MaxQueued and MaxDeadLetters: bounds of each shard.

// shardSep separates a task id's shard from the rest ("2~9f1c..."): the
// ids this package makes on a queue of more than one shard carry it.
const shardSep = "~"

// settingShards is the settings field of the shard count (absent: 1).
const settingShards = "shards"

// shardName is the hash tag of shard i of the queue called name.
func shardName(name string, i int) string { return keys.ShardTag(name, i) }

// shardOfKey is the shard of a tenant, a batch, a deduplication key or a
// caller's task id on a queue of n shards: a jump hash of the key, so
// that a future change of n would move few of them.
func shardOfKey(key string, n int) int {
	if n <= 1 {
		return 0
	}
	return jumphash.HashString(key, n)
}

// carriedShard is the shard an id made by this package carries ("i~..."),
// or -1 when it carries none, or one not below n.
func carriedShard(id string, n int) int {
	head, _, ok := strings.Cut(id, shardSep)
	if !ok || head == "" || len(head) > 3 {
		return -1
	}
	i, err := strconv.Atoi(head)
	if err != nil || i < 0 || i >= n || strconv.Itoa(i) != head {
		return -1
	}
	return i
}

// shardIDPrefix is what a random id made on shard i of a queue of n shards
// starts with ("" on an unsharded queue: its ids stay as they were).
func shardIDPrefix(i, n int) string {
	if n <= 1 {
		return ""
	}
	return strconv.Itoa(i) + shardSep
}

// shards is a queue's layouts, one per shard, known once read: read on
// every Submit and take, so without a lock.
type shards struct {
	all atomic.Pointer[[]layout] // nil until known
}

// layouts returns the queue's layouts, one per shard: known since Open
// for a Queue; a Client reads the shard count from the home shard's
// settings once (a queue Redis does not hold yet has 1).
func (q *Client) layouts(ctx context.Context) ([]layout, error) {
	if p := q.sh.all.Load(); p != nil {
		return *p, nil
	}
	v, err := q.rdb.HMGet(ctx, q.lay.settings, settingShards, settingTTL).Result()
	if err != nil {
		return nil, fmt.Errorf("queue %q: reading its shard count: %w", q.name, err)
	}
	n := 1
	switch {
	case v[0] != nil:
		raw, _ := v[0].(string)
		if n, err = strconv.Atoi(raw); err != nil || n < 1 || n > MaxShards {
			return nil, fmt.Errorf("queue %q: stored shard count %q is not 1 to %d", q.name, raw, MaxShards)
		}
	case v[1] == nil:
		// Not made yet (or lost): read again next time.
		return []layout{q.lay}, nil
	}
	// A queue stored before shards has 1 (n stays 1).
	all, err := q.makeLayouts(n)
	if err != nil {
		return nil, err
	}
	q.setLayouts(all)
	return all, nil
}

// setLayouts records the queue's layouts (a Queue, once registered).
func (q *Client) setLayouts(all []layout) {
	q.sh.all.Store(&all)
}

// known returns the layouts known without a call: a Queue's since Open
// (one, the home shard's, before).
func (q *Client) known() []layout {
	if p := q.sh.all.Load(); p != nil {
		return *p
	}
	return []layout{q.lay}
}

// queueLayout is the home shard's layout of the queue called name,
// checking the name: non-empty, without "}" (the hash tag's end) or "#"
// (which names the shards).
func queueLayout(name string) (layout, error) {
	if strings.Contains(name, "#") {
		return layout{}, invalid("queue name %q: contains '#' (it names a queue's shards)", name)
	}
	l, err := newLayout(name)
	if err != nil {
		if errors.Is(err, keys.ErrInvalidTag) {
			return layout{}, invalid("queue name %q: %v", name, err)
		}
		return layout{}, err
	}
	return l, nil
}

// makeLayouts returns the layouts of the queue's n shards.
func (q *Client) makeLayouts(n int) ([]layout, error) {
	all := make([]layout, n)
	for i := range all {
		l, err := newLayout(shardName(q.name, i))
		if err != nil {
			return nil, err
		}
		l.shard, l.spub = i, q.lay.spub
		all[i] = l
	}
	return all, nil
}

// tenantLayout is the layout of the shard of tenant ten ("" for the
// untenanted tasks' registration: the home shard).
func tenantLayout(all []layout, ten string) layout {
	if ten == "" {
		return all[0]
	}
	return all[shardOfKey(ten, len(all))]
}

// idLayouts lists where the task id may be, most likely first: the shard
// it carries; else the shard of a caller's id (untenanted and unbatched,
// it is there), then the others (a caller's id of a tenant's task is on
// the tenant's shard: found by looking in each).
func idLayouts(all []layout, id string) []layout {
	if len(all) == 1 {
		return all
	}
	if i := carriedShard(id, len(all)); i >= 0 {
		return []layout{all[i]}
	}
	return firstThenOthers(all, shardOfKey(id, len(all)))
}

// firstThenOthers is all with shard first moved to the front.
func firstThenOthers(all []layout, first int) []layout {
	out := make([]layout, 0, len(all))
	out = append(out, all[first])
	for i, l := range all {
		if i != first {
			out = append(out, l)
		}
	}
	return out
}
