package pool

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/redis/go-redis/v9"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"

	"github.com/shepherd-go/shepherd/internal/replica"
	"github.com/shepherd-go/shepherd/rmap"
)

// WithReplicas asks for replicated acknowledgement: DispatchJob returns
// nil only once the job's record, as its worker's Start left it, is on n
// replicas, and StopJob only once the job's removal is; so a failover
// that promotes one of those replicas undoes no dispatch or stop that
// returned nil. It costs a round trip more per call. When fewer replicas
// acknowledge within timeout, or a failover lost the record meanwhile,
// DispatchJob fails with ErrNotReplicated and withdraws the job;
// StopJob fails with ErrNotReplicated and the job may run again after a
// failover: stop it again.
//
// WAIT is not consensus: Redis may promote a replica that did not
// acknowledge, unless each master has one replica, n is every replica, or
// the master refuses writes without enough replicas
// (min-replicas-to-write); docs/replicas.md in the repository says more.
//
// n = 0 (the default) asks for none. n must be 0 or more, timeout
// positive when n is, and shorter than WithCallTimeout and the client's
// ReadTimeout.
func WithReplicas(n int, timeout time.Duration) NodeOption {
	// After the worker's answer, the node reads the job's record back from
	// the master, writes a marker and sends WAIT n timeout, on one
	// connection (one round trip; the marker's write comes after every
	// write the read saw, so replicas holding it hold those too).
	return func(c *nodeConfig) error {
		a := replica.Ack{N: n, Timeout: timeout}
		if err := a.Validate(); err != nil {
			return fmt.Errorf("%w: WithReplicas: %w", ErrInvalidOption, err)
		}
		c.ack = a
		return nil
	}
}

// checkReplicas refuses a replica timeout that the call timeout would
// cut short (options come in any order: AddNode checks it).
func (c nodeConfig) checkReplicas() error {
	if err := c.ack.Fits(c.callTimeout); err != nil {
		return fmt.Errorf("%w: WithReplicas: %w", ErrInvalidOption, err)
	}
	return nil
}

// confirmJob makes sure, with WithReplicas, that what the master holds of
// key is on the replicas (replica.Confirm), and that it is what the call
// left: the record of the dispatch nonce (present), or no record of the
// stopped nonce (absent). It returns nil without WithReplicas.
func (n *Node) confirmJob(ctx context.Context, op, key, nonce string, present bool) error {
	if !n.cfg.ack.On() {
		return nil
	}
	cctx, cancel := context.WithTimeout(ctx, n.cfg.callTimeout)
	defer cancel()
	var get *redis.StringCmd
	err := replica.Confirm(cctx, n.rdb, n.lay.acked, n.cfg.ack, func(p redis.Pipeliner) { get = p.HGet(cctx, n.lay.jobs, key) })
	if errors.Is(err, replica.ErrNotReplicated) {
		return fmt.Errorf("%w: %s of %q: %w", ErrNotReplicated, op, key, err)
	}
	if err != nil {
		return fmt.Errorf("pool: %s of %q: confirming on the replicas: %w", op, key, err)
	}
	has := false
	if raw, gerr := get.Result(); gerr == nil {
		r, perr := parseRecord(raw)
		has = perr != nil || r.Nonce == nonce
	}
	switch {
	case present && !has:
		return fmt.Errorf("%w: %s of %q: the master no longer has the job's record (a failover lost it)", ErrNotReplicated, op, key)
	case !present && has:
		return fmt.Errorf("%w: %s of %q: the master has the job's record again (a failover undid the stop)", ErrNotReplicated, op, key)
	}
	return nil
}

// tooFewReplicas returns an error wrapping ErrNotReplicated when the
// pool's master had fewer replicas connected than WithReplicas asks at
// the watcher's last read (at most replica.WatchEvery ago), else nil: DispatchJob
// then fails at once, writing nothing, rather than start a job that no
// replica can acknowledge (after a planned failover, the new master has
// no replica until Sentinel turns the old one into its replica, about
// 10 s).
func (n *Node) tooFewReplicas() error {
	up := n.replicasUp.Load() - 1 // stored plus one: 0 is "not read yet"
	if !n.cfg.ack.On() || up < 0 || up >= int64(n.cfg.ack.N) {
		return nil
	}
	return fmt.Errorf("%w: the master has %d of the %d replicas asked connected; nothing was dispatched",
		ErrNotReplicated, up, n.cfg.ack.N)
}

// watchLoop watches the pool's master for failovers (replica.Watch)
// until the node closes.
func (n *Node) watchLoop() {
	replica.Watch(n.ctx, []*replica.Watcher{replica.NewWatcher(n.rdb, n.lay.acked)},
		func(_ int, s replica.State) { n.replicasUp.Store(int64(s.Replicas) + 1) },
		func(_ int, f replica.Failover) { n.failedOver(n.ctx, f) },
		func(err error) {
			n.logger.Warn("failover detection is off: the Redis user may not run INFO (see ACLCommands)", slog.Any("error", err))
		})
}

// failedOver reports a change of the master's history
// (replica.Failover.Report), counts it, and makes the replicated maps
// subscribe again on the new master and reload.
func (n *Node) failedOver(ctx context.Context, f replica.Failover) {
	n.metrics.failovers.Add(ctx, 1, n.metrics.attrs, metric.WithAttributes(attribute.Bool("lost", f.Lossy())))
	level, msg, attrs := f.Report("jobs", 0)
	n.logger.Log(ctx, level, msg, attrs...)
	for _, m := range []*rmap.Map{n.shutdown, n.workers, n.slots} {
		if m != nil {
			m.Resync(ctx)
		}
	}
	if n.cfg.clientOnly {
		return
	}
	// What the workers run and what the records say converge: now, and
	// once more after a TTL, when the janitor has recovered what the lost
	// window left behind (dead workers' jobs, stuck starts).
	n.loops.Go(func() {
		n.reconcileNode(n.ctx)
		t := time.NewTimer(n.cfg.workerTTL + time.Second)
		defer t.Stop()
		select {
		case <-t.C:
			n.reconcileNode(n.ctx)
		case <-n.ctx.Done():
		}
	})
}
