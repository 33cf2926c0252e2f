package main

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/shepherd-go/shepherd/internal/keys"
	"github.com/shepherd-go/shepherd/pool"
)

// crashAndRecover crashes victim and watches its jobs restart on the
// other nodes. It returns the time from the crash until every job ran
// again, and how many jobs the victim held.
func (d *demo) crashAndRecover(ctx context.Context, victim *demoNode, keys []string) (time.Duration, int, error) {
	labels := map[string]bool{}
	for _, l := range victim.workers {
		labels[l] = true
	}
	d.printf("\ncrashing %s: no Close, no goodbye. The demo is one process, so the crash is\n"+
		"simulated in-process: the node's Redis connections are cut and its handlers are\n"+
		"dead from now on. The other nodes only notice its silence.\n", victim.label)
	victim.dead.Store(true)
	crashed := time.Now()
	if err := victim.rdb.Close(); err != nil {
		return 0, 0, fmt.Errorf("crash %s: %w", victim.label, err)
	}
	held := d.state.crash(labels)
	d.printf("  %s held %d jobs; they now have no live worker\n", victim.label, held)

	observer := d.nodes[0].node
	deadline := time.NewTimer(10*d.cfg.ttl + 30*time.Second)
	defer deadline.Stop()
	tick := time.NewTicker(250 * time.Millisecond)
	defer tick.Stop()
	declared := false
	for {
		st, err := observer.Stats(ctx)
		if err != nil {
			return 0, 0, err
		}
		since := time.Since(crashed).Round(10 * time.Millisecond)
		running, _ := d.state.snapshot()
		if !declared && !slices.ContainsFunc(st.Workers, func(w pool.WorkerStats) bool { return w.Node == victim.node.ID() }) {
			declared = true
			d.printf("  +%-7v the pool declared %s's workers dead (silent for the %v TTL, by Redis's clock); their jobs are requeued\n", since, victim.label, d.cfg.ttl)
		}
		d.printf("  +%-7v running %d/%d on live workers; %d without a live owner, %d queued, %d restarted\n",
			since, running, len(keys), len(st.Orphans), st.QueueDepth, d.restarts())
		if running == len(keys) && declared && len(st.Orphans) == 0 && st.QueueDepth == 0 {
			return time.Since(crashed), held, nil
		}
		select {
		case <-ctx.Done():
			return 0, 0, ctx.Err()
		case <-deadline.C:
			return 0, 0, fmt.Errorf("jobs not recovered %v after the crash: %d of %d run", time.Since(crashed).Round(time.Second), running, len(keys))
		case <-tick.C:
		}
	}
}

func (d *demo) restarts() int {
	d.state.mu.Lock()
	defer d.state.mu.Unlock()
	return d.state.restarts
}

// verify checks that every dispatched key runs on exactly one live worker,
// by the handlers' own account, and that the pool records exactly these
// jobs.
func (d *demo) verify(ctx context.Context, want []string) error {
	if missing := d.state.missing(want); len(missing) > 0 {
		return fmt.Errorf("LOST: %d jobs run nowhere, for instance %q", len(missing), missing[0])
	}
	if running, _ := d.state.snapshot(); running != len(want) {
		return fmt.Errorf("%d jobs run, %d were dispatched", running, len(want))
	}
	got, err := d.nodes[0].node.JobKeys(ctx)
	if err != nil {
		return err
	}
	if !slices.Equal(got, want) { // both sorted
		return fmt.Errorf("the pool records %d jobs, %d were dispatched", len(got), len(want))
	}
	d.printf("\nverified: all %d jobs run, each on one live worker, and the pool records exactly them\n", len(want))
	return nil
}

// cleanup shuts the pool down from a surviving node, closes every node and
// client, and checks that the pool left no key in Redis.
func (d *demo) cleanup(opt *redis.Options) error {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second+2*d.cfg.ttl)
	defer cancel()
	var errs []error
	var survivor *demoNode
	for _, dn := range d.nodes {
		if dn.node != nil && !dn.dead.Load() {
			survivor = dn
			break
		}
	}
	if survivor != nil {
		d.printf("\nShutdown: stopping every job on every node and deleting the pool\n")
		if err := survivor.node.Shutdown(ctx); err != nil {
			errs = append(errs, fmt.Errorf("shutdown: %w", err))
		}
	}
	for _, dn := range d.nodes {
		if dn.node == nil {
			continue
		}
		var err error
		if dn.dead.Load() {
			// Its client is closed, so nothing Close writes can land and
			// its readers never catch up (they would hold Close until ctx
			// ends): close it with a spent context, only to stop its
			// goroutines, and ignore the Redis errors that follow.
			spent, cancel := context.WithCancel(ctx)
			cancel()
			_ = dn.node.Close(spent)
		} else {
			err = dn.node.Close(ctx)
		}
		if err != nil && !errors.Is(err, pool.ErrPoolShutdown) {
			errs = append(errs, fmt.Errorf("close %s: %w", dn.label, err))
		}
		if !dn.dead.Load() {
			errs = append(errs, dn.rdb.Close())
		}
	}
	if survivor != nil {
		left, err := countKeys(ctx, opt, d.cfg.pool)
		if err != nil {
			errs = append(errs, err)
		} else if left > 0 {
			errs = append(errs, fmt.Errorf("%d keys of pool %s left in Redis", left, d.cfg.pool))
		} else {
			d.printf("left behind: nothing (0 keys of pool %s in Redis", d.cfg.pool)
			if d.private {
				d.printf("; the private Redis the demo started is removed on exit")
			}
			d.printf(")\n")
		}
	}
	return errors.Join(errs...)
}

// countKeys counts the pool's keys with SCAN.
func countKeys(ctx context.Context, opt *redis.Options, poolName string) (int, error) {
	space, err := keys.New(poolName)
	if err != nil {
		return 0, err
	}
	rdb := redis.NewClient(opt)
	defer rdb.Close()
	n := 0
	iter := rdb.Scan(ctx, 0, space.Pattern(), 1000).Iterator()
	for iter.Next(ctx) {
		n++
	}
	return n, iter.Err()
}
