package queue

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"

	"github.com/shepherd-go/shepherd/internal/replica"
)

// WithReplicas asks for replicated acknowledgement: a Submit (and a
// Batch's) returns nil only once n replicas acknowledged the writes of
// its call, and a future completes only once its outcome is on n
// replicas, so that a failover that promotes one of them undoes no
// Submit that returned nil and no result that a caller received.
//
// Each Submit call (a batch of Submits) sends WAIT n timeout in the same
// pipeline, on the same connection, as its script; when fewer replicas
// acknowledge within timeout, its Submits fail with an error wrapping
// ErrNotReplicated and their tasks are withdrawn, as after any failed
// Submit. An outcome (from its message or the once-a-second poll) is
// read back from the master with a write and a WAIT after it
// (replica.Confirm), one round trip per batch of outcomes; one that
// cannot be confirmed yet stays pending and is tried again at the next
// poll.
//
// WAIT is not consensus: Redis may promote a replica that did not
// acknowledge. It promotes one that did when each master has one
// replica, or n is every replica, or the masters refuse writes without
// enough replicas (min-replicas-to-write); docs/replicas.md in the
// repository says more. It costs a round trip to the replicas a call.
//
// n = 0 (the default) asks for none: Redis's acknowledgement alone. n
// must be 0 or more, timeout positive when n is, and shorter than
// WithCallTimeout and the client's ReadTimeout (a WAIT blocks its
// connection for up to timeout).
func WithReplicas(n int, timeout time.Duration) Option {
	return func(c *config) error {
		a := replica.Ack{N: n, Timeout: timeout}
		if err := a.Validate(); err != nil {
			return invalid("WithReplicas: %v", err)
		}
		c.ack = a
		return nil
	}
}

// checkReplicas refuses a replica timeout that the call timeout would
// cut short (options are applied in any order: Open checks it).
func (c config) checkReplicas() error {
	if err := c.ack.Fits(c.callTimeout); err != nil {
		return invalid("WithReplicas: %v", err)
	}
	return nil
}

// tooFewReplicas returns an error wrapping ErrNotReplicated when the
// master of shard l had fewer replicas connected than WithReplicas asks
// at the watcher's last read (at most replica.WatchEvery ago), else nil: a
// Submit then fails at once, writing nothing, rather than queue a task
// that no replica can acknowledge, which a worker could start before its
// withdrawal (as after a planned failover, whose new master has no
// replica until Sentinel turns the old one into its replica, about 10 s).
func (q *Queue) tooFewReplicas(l layout) error {
	if !q.cfg.ack.On() {
		return nil
	}
	i := 0
	if _, ok := q.rdb.(*redis.ClusterClient); ok {
		i = l.shard
	}
	if i >= len(q.replicasUp) {
		return nil
	}
	up := q.replicasUp[i].Load()
	if up < 0 || up >= int64(q.cfg.ack.N) {
		return nil
	}
	return fmt.Errorf("%w: the master has %d of the %d replicas asked connected; nothing was queued", ErrNotReplicated, up, q.cfg.ack.N)
}

// confirmLoop completes the futures whose outcome message came, once
// their outcome is confirmed on the replicas (WithReplicas), a batch of
// them a round trip.
func (q *Queue) confirmLoop() {
	ctx := q.tasks.Context()
	batch := make([]*Future, 0, 1000)
	for {
		batch = batch[:0]
		select {
		case <-ctx.Done():
			return
		case f := <-q.toConfirm:
			batch = append(batch, f)
		}
	more:
		for len(batch) < cap(batch) {
			select {
			case f := <-q.toConfirm:
				batch = append(batch, f)
			default:
				break more
			}
		}
		q.confirmOutcomes(ctx, batch)
	}
}

// outcomeHeard hands f, whose outcome message came, to confirmLoop; a
// full hand-over leaves it to the next poll.
func (q *Queue) outcomeHeard(f *Future) {
	select {
	case q.toConfirm <- f:
	default:
	}
}

// confirmOutcomes reads the outcomes of pending futures as pollOutcomes
// does, shard by shard, each shard's reads followed by a confirmation
// on the replicas (replica.Confirm), and completes those finished in a
// shard whose confirmation succeeded. It returns the ids of the futures
// it ended with ErrOutcomeLost.
func (q *Queue) confirmOutcomes(ctx context.Context, pending []*Future) []string {
	cctx, cancel := context.WithTimeout(ctx, loopCallTimeout)
	defer cancel()
	all := q.known()
	type read struct {
		f *Future
		r *taskRead
	}
	reads := make([][]read, len(all)) // per shard
	where := make(map[*Future]int, len(pending))
	for _, f := range pending {
		in := idLayouts(all, f.id)
		if f.shard >= 0 && f.shard < len(all) {
			in = all[f.shard : f.shard+1]
		}
		where[f] = len(in)
		for _, l := range in {
			reads[l.shard] = append(reads[l.shard], read{f: f})
		}
	}
	type verdict struct {
		seen, absent int
		v            []any
	}
	verdicts := make(map[*Future]*verdict, len(pending))
	for i, rs := range reads {
		if len(rs) == 0 {
			continue
		}
		l := all[i]
		err := replica.Confirm(cctx, q.rdb, l.acked, q.cfg.ack, func(p redis.Pipeliner) {
			for j := range rs {
				rs[j].r = readTask(cctx, p, l, rs[j].f.id, outcomeFields...)
			}
		})
		// Too few replicas: nothing read is judged, not even a task
		// missing. The server read may not be the master that holds the
		// queue: right after a failover, a client may still reach the old
		// master, restarted empty, which has no replica (Sentinel turns
		// it into one about 10 s later); a master with n replicas is one.
		if err != nil {
			q.warnUnconfirmed(ctx, i, len(rs), err)
			continue
		}
		for _, r := range rs {
			vd := verdicts[r.f]
			if vd == nil {
				vd = &verdict{}
				verdicts[r.f] = vd
			}
			vd.seen++
			v := r.r.Val()
			if len(v) != len(outcomeFields) {
				continue
			}
			if present(v) {
				vd.v = v
			} else {
				vd.absent++
			}
		}
	}
	var lost []string
	for f, vd := range verdicts {
		if vd.v == nil {
			if vd.seen == where[f] && vd.absent == vd.seen {
				q.forget(f)
				f.complete(nil, fmt.Errorf("%w: %q", ErrOutcomeLost, f.id))
				lost = append(lost, f.id)
			}
			continue
		}
		if st, res, err := storedOutcome(f.id, vd.v); finished(st) {
			q.forget(f)
			f.complete(res, err)
		}
	}
	return lost
}

// warnUnconfirmed logs that outcomes could not be confirmed, at most once
// every unconfirmedWarnEvery: while the master has no replica (10 s after
// a planned failover) every poll and every batch of messages fails so.
func (q *Queue) warnUnconfirmed(ctx context.Context, shard, futures int, err error) {
	if ctx.Err() != nil {
		return
	}
	now := time.Now().UnixNano()
	last := q.unconfirmedWarned.Load()
	if now-last < int64(unconfirmedWarnEvery) || !q.unconfirmedWarned.CompareAndSwap(last, now) {
		return
	}
	q.logger.Warn("outcomes not confirmed on the replicas yet: their futures wait", "shard", shard, "futures", futures, "error", err)
}

// unconfirmedWarnEvery spaces warnUnconfirmed's lines.
const unconfirmedWarnEvery = 10 * time.Second

// Result returns the outcome of the task id, as Client.Result does;
// with WithReplicas, only once that outcome is on the replicas asked
// (replica.Confirm): else an error wrapping ErrNotReplicated.
func (q *Queue) Result(ctx context.Context, id string) ([]byte, error) {
	res, err := q.Client.Result(ctx, id)
	var te *TaskError
	if !q.cfg.ack.On() || err != nil && !errors.As(err, &te) {
		return res, err
	}
	for _, l := range idLayouts(q.known(), id) {
		var r *taskRead
		cerr := replica.Confirm(ctx, q.rdb, l.acked, q.cfg.ack, func(p redis.Pipeliner) { r = readTask(ctx, p, l, id, outcomeFields...) })
		if errors.Is(cerr, replica.ErrNotReplicated) {
			return nil, fmt.Errorf("%w: the outcome of %q: %w", ErrNotReplicated, id, cerr)
		}
		if cerr != nil {
			return nil, fmt.Errorf("queue: result: %w", cerr)
		}
		if st, _, _ := storedOutcome(id, r.Val()); finished(st) {
			return res, err
		}
	}
	return nil, fmt.Errorf("%w: the outcome of %q is no longer on the master", ErrNotReplicated, id)
}

// watchLoop watches the masters of the queue's shards for failovers
// (replica.Watch) until the process closes: one watcher for a single
// server, one a shard on a Redis Cluster.
func (q *Queue) watchLoop() {
	ctx := q.tasks.Context()
	all := q.known()
	if _, ok := q.rdb.(*redis.ClusterClient); !ok {
		all = all[:1] // every shard is on the one server
	}
	watchers := make([]*replica.Watcher, len(all))
	for i, l := range all {
		watchers[i] = replica.NewWatcher(q.rdb, l.acked)
	}
	reported := "" // the new id last reported: shards on one master report once
	replica.Watch(ctx, watchers,
		func(i int, s replica.State) {
			q.watched.Store(true)
			q.replicasUp[i].Store(int64(s.Replicas))
		},
		func(i int, f replica.Failover) {
			if f.NewID != reported {
				reported = f.NewID
				q.failedOver(ctx, f)
			}
			q.followMaster(ctx, i)
		},
		func(err error) {
			q.logger.Warn("failover detection is off: the Redis user may not run INFO (see ACLCommands)", "error", err)
		})
}

// followMaster moves the subscriptions that carry shard i's messages to
// the master the client now talks to.
func (q *Queue) followMaster(ctx context.Context, i int) {
	if !q.pubsub.sharded {
		i = 0
	}
	if err := q.pubsub.renew(ctx, i); err != nil && ctx.Err() == nil {
		q.logger.Warn("subscribing again after a failover failed: messages wait for the client's reconnect; the polls make up for them",
			"error", err)
	}
	q.signalWake() // a wake-up published meanwhile may be lost
}

// failedOver reports a change of the master's history
// (replica.Failover.Report), with the futures that end with
// ErrOutcomeLost for it, and counts it.
func (q *Queue) failedOver(ctx context.Context, f replica.Failover) {
	// The futures whose task the new master does not know end now, not
	// at the next poll.
	ended := q.pollLost(ctx)
	q.m.failovers.Add(ctx, 1, q.m.attrs, metric.WithAttributes(attribute.Bool("lost", f.Lossy() || len(ended) > 0)))
	level, msg, attrs := f.Report("tasks this process submitted", len(ended))
	attrs = append(attrs, slog.Int("futures_lost", len(ended)), slog.Any("lost_task_ids", firstIDs(ended, 20)))
	q.logger.Log(ctx, level, msg, attrs...)
	if s := q.current(); s != nil {
		s.reconcileRunning(ctx)
	}
}

// pollLost reads the outcomes of the pending futures now (pollOnce) and
// returns the ids of those it ended with ErrOutcomeLost.
func (q *Queue) pollLost(ctx context.Context) []string {
	pending := q.pendingFutures(1000)
	if len(pending) == 0 {
		return nil
	}
	return q.pollOutcomes(ctx, pending)
}

// firstIDs returns up to n of ids, for a log line.
func firstIDs(ids []string, n int) []string {
	if len(ids) > n {
		return ids[:n]
	}
	return ids
}

// reconcileRunning ends the attempts this process runs whose task the
// master does not hold as running here (active names another process, or
// nothing): after a failover that lost writes, the take that handed them
// out may be gone, and the task waits or runs elsewhere. They are
// cancelled and marked lost, as when the process is declared dead: their
// outcomes would be refused as late. It returns how many it ended.
func (s *Server) reconcileRunning(ctx context.Context) int {
	q := s.q
	all := q.known()
	s.mu.Lock()
	byShard := make(map[int][]string)
	for id, r := range s.running {
		if !r.finished.Load() && r.shard >= 0 && r.shard < len(all) {
			byShard[r.shard] = append(byShard[r.shard], id)
		}
	}
	s.mu.Unlock()
	ended := 0
	for shard, ids := range byShard {
		cctx, cancel := context.WithTimeout(ctx, loopCallTimeout)
		vals, err := q.rdb.HMGet(cctx, all[shard].active, ids...).Result()
		cancel()
		if err != nil {
			q.logger.Warn("reconciling the attempts in flight with Redis after a failover failed", "shard", shard, "error", err)
			continue
		}
		s.mu.Lock()
		for i, v := range vals {
			owner, _ := v.(string)
			owner, _, _ = strings.Cut(owner, "\n") // the process, first (wire.go, "Running attempts")
			r := s.running[ids[i]]
			if owner == q.proc || r == nil || r.finished.Load() {
				continue
			}
			r.lost.Store(true)
			r.cancel()
			ended++
		}
		s.mu.Unlock()
	}
	if ended > 0 {
		q.logger.Warn("attempts in flight ended: after the failover Redis no longer holds them as this process's", "attempts", ended)
	}
	return ended
}
