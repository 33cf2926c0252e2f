package pool

import "maps"

// settle runs after each event the worker handled. A full rebalance pass
// costs a jump hash per running job, so it runs only when the table
// differs from the one the last pass used; otherwise only the event's key
// is checked (a start routed under a table older than ours). That keeps
// an event's cost independent of how many jobs the worker runs.
func (w *Worker) settle(key string) {
	if len(w.jobs) == 0 {
		return
	}
	t := w.node.table()
	if w.balanced == nil || !t.sameSlots(*w.balanced) {
		w.rebalance()
		return
	}
	if _, ok := w.jobs[key]; ok {
		if owner := t.owner(key); owner != "" && owner != w.id {
			w.move(key)
		}
	}
}

// sameSlots reports whether t and u map every key the same way. It
// compares contents, not revisions: revisions restart when Redis loses
// the slots map.
func (t table) sameSlots(u table) bool {
	return t.size == u.size && maps.Equal(t.slots, u.slots)
}
