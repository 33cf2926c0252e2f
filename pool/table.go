package pool

import (
	"context"
	"maps"
	"strconv"

	"github.com/shepherd-go/shepherd/jumphash"
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

// sameSlots reports whether t and u map every key the same way. It
// compares contents, not revisions: revisions restart when Redis loses
// the slots map.
func (t table) sameSlots(u table) bool {
	return t.size == u.size && maps.Equal(t.slots, u.slots)
}

// claimSlot takes the lowest free slot of the table for worker id, so that
// a joiner fills the hole a leaver left and only keys of that hole move.
func (n *Node) claimSlot(ctx context.Context, id string) (int, error) {
	for {
		t := n.table()
		slot := t.size
		for i := 0; i < t.size; i++ {
			if _, taken := t.slots[i]; !taken {
				slot = i
				break
			}
		}
		res, err := n.slots.SetIfNotExists(ctx, strconv.Itoa(slot), id)
		if err != nil {
			return 0, err
		}
		if !res.Applied {
			continue // taken meanwhile; our copy now shows it
		}
		if slot >= t.size {
			if err := n.growTable(ctx, slot+1); err != nil {
				return 0, err
			}
		}
		return slot, nil
	}
}

// growTable raises the table size to at least size. It never shrinks: a
// smaller table would move keys between surviving workers.
func (n *Node) growTable(ctx context.Context, size int) error {
	for {
		cur, ok := n.slots.Get(sizeField)
		if !ok {
			res, err := n.slots.SetIfNotExists(ctx, sizeField, strconv.Itoa(size))
			if err != nil || res.Applied {
				return err
			}
			continue
		}
		c, _ := strconv.Atoi(cur)
		if c >= size {
			return nil
		}
		if _, err := n.slots.TestAndSet(ctx, sizeField, cur, strconv.Itoa(size)); err != nil {
			return err
		}
	}
}
