package rmap

import (
	"context"
	"fmt"
	"slices"

	"github.com/shepherd-go/shepherd/internal/script"
)

// This file holds the local copy: its reads, and how changes and
// snapshots are applied to it.

// Get returns the local value of key and whether it exists. It never
// touches Redis; cost is one map lookup under a read lock.
func (m *Map) Get(key string) (string, bool) {
	m.mu.RLock()
	v, ok := m.data[key]
	m.mu.RUnlock()
	return v, ok
}

// GetValues returns the list stored at key by AppendValues and friends,
// or nil when the key does not exist. It returns an error wrapping
// ErrNotList when the value is not a list. It never touches Redis.
func (m *Map) GetValues(key string) ([]string, error) {
	v, ok := m.Get(key)
	if !ok {
		return nil, nil
	}
	vals, err := DecodeValues(v)
	if err != nil {
		return nil, fmt.Errorf("rmap: get values %q: %w", key, err)
	}
	return vals, nil
}

// Keys returns the local keys in sorted order: O(n log n).
func (m *Map) Keys() []string {
	m.mu.RLock()
	ks := make([]string, 0, len(m.data))
	for k := range m.data {
		ks = append(ks, k)
	}
	m.mu.RUnlock()
	slices.Sort(ks)
	return ks
}

// Len returns the number of local entries.
func (m *Map) Len() int {
	m.mu.RLock()
	defer m.mu.RUnlock()
	return len(m.data)
}

// Map returns a copy of the local content: O(n). The caller owns it.
func (m *Map) Map() map[string]string {
	m.mu.RLock()
	defer m.mu.RUnlock()
	out := make(map[string]string, len(m.data))
	for k, v := range m.data {
		out[k] = v
	}
	return out
}

// Snapshot returns a copy of the local content with its revision, taken
// together, and the local version: a number that grows with every change
// to the local copy (reloads included), so that a caller can cache what it
// derives from the content and compare Version to know it is current.
// Unlike revisions, versions never restart; they are local to this Map.
func (m *Map) Snapshot() (data map[string]string, rev int64, version uint64) {
	m.mu.RLock()
	defer m.mu.RUnlock()
	data = make(map[string]string, len(m.data))
	for k, v := range m.data {
		data[k] = v
	}
	return data, m.rev, m.version
}

// Version returns the local version (see Snapshot) in O(1).
func (m *Map) Version() uint64 {
	m.mu.RLock()
	defer m.mu.RUnlock()
	return m.version
}

// Rev returns the revision of the local copy: the number of writes the map
// has seen since it was created in Redis (0 for a map Redis does not
// hold). Revisions restart after Destroy or after Redis lost the map.
func (m *Map) Rev() int64 {
	m.mu.RLock()
	defer m.mu.RUnlock()
	return m.rev
}

// Sync waits until the local copy reflects every write that Redis had
// committed when Sync was called, or returns ctx's error or ErrClosed. It
// costs one round trip plus the wait for in-flight changes. Writes already guarantee this for their own
// effect; Sync is for seeing other processes' writes.
func (m *Map) Sync(ctx context.Context) error {
	if m.isClosed() {
		return ErrClosed
	}
	epoch, rev, err := m.remoteRev(ctx)
	if err == nil {
		err = m.waitFor(ctx, epoch, rev)
	}
	if err != nil {
		return fmt.Errorf("rmap: sync %q: %w", m.name, err)
	}
	return nil
}

func (m *Map) isClosed() bool {
	m.mu.RLock()
	defer m.mu.RUnlock()
	return m.closed
}

// reload replaces the local copy with a snapshot from Redis.
func (m *Map) reload(ctx context.Context) error {
	m.mu.Lock()
	m.loadSeq++
	seq := m.loadSeq
	m.loading = true
	m.mu.Unlock()
	data, epoch, rev, err := m.fetch(ctx)
	m.mu.Lock()
	defer m.mu.Unlock()
	m.loading = false
	if err != nil {
		return err
	}
	m.installLocked(data, epoch, rev, seq)
	return nil
}

// fetch reads a consistent snapshot: the hash with its revision.
func (m *Map) fetch(ctx context.Context) (map[string]string, string, int64, error) {
	res, err := script.Run(ctx, m.rdb, loadScript, "rmap.load", m.keys[:2])
	if err != nil {
		return nil, "", 0, err
	}
	a, ok := res.([]any)
	var flat []any
	if ok && len(a) == 3 {
		flat, ok = a[2].([]any)
	}
	if !ok || len(flat)%2 != 0 {
		return nil, "", 0, fmt.Errorf("rmap.load: unexpected reply %T", res)
	}
	epoch, _ := a[0].(string)
	rev, err := toInt(a[1])
	if err != nil {
		return nil, "", 0, err
	}
	data := make(map[string]string, len(flat)/2)
	for i := 0; i < len(flat); i += 2 {
		k, _ := flat[i].(string)
		v, _ := flat[i+1].(string)
		data[k] = v
	}
	return data, epoch, rev, nil
}

// installLocked replaces the local copy and tells subscribers the
// difference.
func (m *Map) installLocked(data map[string]string, epoch string, rev int64, seq int64) {
	if len(m.subs) > 0 {
		for k, old := range m.data {
			if _, ok := data[k]; !ok {
				m.emitLocked(Event{Kind: EventDelete, Key: k, Value: old, Rev: rev})
			}
		}
		for k, v := range data {
			if old, ok := m.data[k]; !ok || old != v {
				m.emitLocked(Event{Kind: EventSet, Key: k, Value: v, Rev: rev})
			}
		}
	}
	m.data, m.epoch, m.rev = data, epoch, rev
	m.loadDone = seq
	m.reloads++
	m.version++
	m.wakeLocked()
}

// nextLocked reports whether c is the change that directly follows the
// local copy.
func (m *Map) nextLocked(c *change) bool {
	if c.epoch == m.epoch && c.rev == m.rev+1 {
		return true
	}
	// The first revision of a new incarnation (after Destroy, or after
	// Redis lost the map) follows an empty copy of none.
	return m.epoch == "" && m.rev == 0 && len(m.data) == 0 && c.rev == 1 && c.op != opDestroy
}

// applyLocked applies c, which must satisfy nextLocked.
func (m *Map) applyLocked(c *change) {
	switch c.op {
	case opSet:
		m.data[c.key] = c.value
		m.emitLocked(Event{Kind: EventSet, Key: c.key, Value: c.value, Rev: c.rev})
	case opDelete:
		if old, ok := m.data[c.key]; ok {
			delete(m.data, c.key)
			m.emitLocked(Event{Kind: EventDelete, Key: c.key, Value: old, Rev: c.rev})
		}
	case opClear, opDestroy:
		for k, old := range m.data {
			m.emitLocked(Event{Kind: EventDelete, Key: k, Value: old, Rev: c.rev})
		}
		clear(m.data)
	}
	m.epoch, m.rev = c.epoch, c.rev
	m.version++
	if c.op == opDestroy {
		// The next write starts a new incarnation at revision 1.
		m.epoch, m.rev = "", 0
	}
	m.wakeLocked()
}

func (m *Map) emitLocked(e Event) {
	for s := range m.subs {
		s.push(e)
	}
}

// wakeLocked wakes everyone waiting for the local copy to advance.
func (m *Map) wakeLocked() {
	if m.advanced != nil {
		close(m.advanced)
		m.advanced = nil
	}
}

// reflectsLocked reports whether the local copy includes revision rev of
// incarnation epoch, or a reload that began after seq (whose snapshot was
// taken later, so includes it).
func (m *Map) reflectsLocked(epoch string, rev, seq int64) bool {
	return (m.epoch == epoch && m.rev >= rev) || m.loadDone > seq
}

// waitFor waits until the local copy reflects (epoch, rev). It returns
// ErrClosed or ctx's error when it cannot.
func (m *Map) waitFor(ctx context.Context, epoch string, rev int64) error {
	m.mu.Lock()
	seq := m.loadSeq
	kicked := false
	for !m.reflectsLocked(epoch, rev, seq) {
		if m.closed {
			m.mu.Unlock()
			return ErrClosed
		}
		if m.epoch != epoch && !kicked {
			kicked = true
			m.reloadWanted.Store(true)
			m.mu.Unlock()
			m.wakeLoop(ctx)
			m.mu.Lock()
			continue
		}
		if m.advanced == nil {
			m.advanced = make(chan struct{})
		}
		ch := m.advanced
		m.mu.Unlock()
		select {
		case <-ch:
		case <-ctx.Done():
			return ctx.Err()
		}
		m.mu.Lock()
	}
	m.mu.Unlock()
	return nil
}

// wakeLoop makes the sync loop's pending receive return, by a PING on its
// pub/sub connection, so that it sees reloadWanted. If the PING fails, the
// loop's receive fails too and it reloads anyway.
func (m *Map) wakeLoop(ctx context.Context) {
	m.psMu.Lock()
	ps := m.ps
	m.psMu.Unlock()
	if err := ps.Ping(ctx, "wake"); err != nil {
		m.cfg.logger.Debug("rmap: wake sync loop", "map", m.name, "err", err)
	}
}
