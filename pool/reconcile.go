package pool

import (
	"context"
	"log/slog"
	"time"
)

// Reconciliation: after a failover that lost writes, what a node runs and
// what Redis records may disagree both ways. A rebalance in the lost
// window moved a job to a new worker, which started it, and the old
// worker, which stopped it; the new master has the record from before
// the move, so the job's record names the old worker, which runs
// nothing, while the new worker runs a copy that no record knows. A
// dispatch or a stop that the new master lacks leaves a run with no
// record, or a record with no run. Nothing in the ordinary flow notices:
// events travel only when something changes.
//
// So after a failover, every node reads the records of the pool once
// (reconcileNode) and hands each of its workers what the records say
// it should run; each worker then, in its own loop, reads again the
// records of the keys where the two differ and acts on the fresh read:
// it stops a run whose record is gone or names another worker or
// generation (fenced, as every local stop), starts a job whose record
// says it runs on this worker in generation g while it does not (the
// record already says so: nothing is written), and ends a stop whose
// record waits on this worker (its event or its end was lost), as the
// stop event would.

// reconcileNode reads every job record and hands each of the node's
// workers the records that name it (reconcileWorker does the rest).
func (n *Node) reconcileNode(ctx context.Context) {
	n.mu.Lock()
	workers := make(map[string]*Worker, len(n.myWorkers))
	for id, w := range n.myWorkers {
		workers[id] = w
	}
	n.mu.Unlock()
	if len(workers) == 0 {
		return
	}
	expect := make(map[string]map[string]record, len(workers))
	for id := range workers {
		expect[id] = map[string]record{}
	}
	iter := n.rdb.HScan(ctx, n.lay.jobs, 0, "", 1000).Iterator()
	for iter.Next(ctx) {
		key := iter.Val()
		if !iter.Next(ctx) {
			break
		}
		r, err := parseRecord(iter.Val())
		if err != nil {
			continue
		}
		if m, ok := expect[r.Worker]; ok && (r.State == stateRunning || r.State == stateStopping) {
			m[key] = r
		}
	}
	if err := iter.Err(); err != nil {
		n.logger.Warn("reconciling the jobs with the records after a failover failed: reading the records",
			slog.Any("error", err))
		return
	}
	for id, w := range workers {
		select {
		case <-w.recheck: // an older request: this one replaces it
		default:
		}
		select {
		case w.recheck <- expect[id]:
		default: // another reconciliation filled it first
		}
	}
}

// reconcile compares the jobs the worker runs with expect, the records
// that named it when the node read them, reads again the records of the
// keys where the two differ, and stops or starts those that still
// differ. It runs in the worker's loop.
func (w *Worker) reconcile(expect map[string]record) {
	n := w.node
	var keys []string
	for key, h := range w.jobs {
		if r, ok := expect[key]; !ok || r.State != stateRunning || r.Gen != h.gen || r.Nonce != h.nonce {
			keys = append(keys, key)
		}
	}
	for key := range expect {
		if _, ok := w.jobs[key]; !ok {
			keys = append(keys, key)
		}
	}
	if len(keys) == 0 {
		return
	}
	ctx, cancel := context.WithTimeout(n.ctx, n.cfg.stopTimeout())
	defer cancel()
	fresh, err := n.readRecords(ctx, keys)
	if err != nil {
		w.logger.Warn("reconciling the jobs with the records failed", slog.Any("error", err))
		return
	}
	stopped, started, ended := 0, 0, 0
	for _, key := range keys {
		r, recorded := fresh[key]
		h, runs := w.jobs[key]
		mine := recorded && r.Worker == w.id && r.State == stateRunning
		switch {
		case recorded && r.Worker == w.id && r.State == stateStopping:
			// A stop on its way, or one whose event or end the failover
			// lost: end it now, as its event would.
			if runs {
				_ = w.stopRun(ctx, key, h.gen)
				delete(w.jobs, key)
			}
			if err := w.endStop(ctx, key); err != nil {
				w.logger.Warn("reconciling: ending a stop failed", slog.String("key", key), slog.Any("error", err))
			} else {
				ended++
			}
		case runs && !(mine && r.Gen == h.gen && r.Nonce == h.nonce):
			// A run that no record backs: stop it here (fenced by its
			// generation), writing nothing.
			_ = w.stopRun(ctx, key, h.gen)
			delete(w.jobs, key)
			stopped++
		case !runs && mine:
			if w.restart(key, r) {
				started++
			}
		}
	}
	if stopped+started+ended > 0 {
		w.logger.Warn("jobs reconciled with their records after a failover",
			slog.Int("stopped_unrecorded", stopped), slog.Int("started_recorded", started), slog.Int("stops_ended", ended))
		n.metrics.add(ctx, n.metrics.reconciled, int64(stopped+started+ended))
	}
}

// restart starts the job key, whose record r says it runs on this worker
// while it does not, in r's generation; a failed Start goes the way of
// any failed start (startFailed). It reports whether the job runs.
func (w *Worker) restart(key string, r record) bool {
	n := w.node
	ctx, cancel := context.WithTimeout(n.ctx, n.cfg.startTimeout())
	payloads, err := readPayloads(ctx, n.rdb, n.lay, []string{key})
	cancel()
	var payload []byte
	if err == nil {
		payload = payloads[0]
	}
	if err != nil {
		w.logger.Warn("reconciling: reading a job's payload failed", slog.String("key", key), slog.Any("error", err))
		return false
	}
	h := header{nonce: r.Nonce, gen: r.Gen, replyTo: noReply, reqID: noReply}
	job := &Job{Key: key, Payload: payload, CreatedAt: time.UnixMilli(r.Created), Attempt: r.Starts, trace: r.Trace}
	if _, err := w.runStart(job, r.Gen); err != nil {
		w.startFailed(key, h, err)
		return false
	}
	w.jobs[key] = h
	return true
}

// readRecords reads the records of keys (missing ones are left out).
func (n *Node) readRecords(ctx context.Context, keys []string) (map[string]record, error) {
	out := make(map[string]record, len(keys))
	for i := 0; i < len(keys); i += 1000 {
		chunk := keys[i:min(i+1000, len(keys))]
		vals, err := n.rdb.HMGet(ctx, n.lay.jobs, chunk...).Result()
		if err != nil {
			return nil, err
		}
		for j, v := range vals {
			s, ok := v.(string)
			if !ok {
				continue
			}
			if r, err := parseRecord(s); err == nil {
				out[chunk[j]] = r
			}
		}
	}
	return out, nil
}
