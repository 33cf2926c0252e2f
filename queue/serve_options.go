package queue

import (
	"runtime"
	"time"

	"github.com/shepherd-go/shepherd/limit"
)

// ServeOption configures Serve.
type ServeOption func(*serveConfig) error

type serveConfig struct {
	workers     int
	prefetch    int
	prefetchSet bool          // WithPrefetch: else the process takes ahead on its own (aheadDepth)
	maxHeld     time.Duration // maxHeld; tests set another
	afterRound  func(round)   // tests: called by feed after each round, before stopIfDrained
	mode        Mode
	limitAlg    limit.Algorithm // WithConcurrencyLimit's (nil: the default)
	limitSet    bool            // WithConcurrencyLimit
	limitFloor  int
	shared      *Limit // WithLimit's
	sharedPart  string
	backoffBase time.Duration
	backoffCap  time.Duration
}

func defaultServeConfig() serveConfig {
	return serveConfig{workers: DefaultWorkers(), backoffBase: DefaultBackoffBase, backoffCap: DefaultBackoffCap, maxHeld: maxHeld}
}

// DefaultWorkers is the default number of workers of a process:
// runtime.NumCPU()-1, at least 1 (one core left to the process's own
// work and the runtime).
func DefaultWorkers() int { return max(runtime.NumCPU()-1, 1) }

// WithWorkers sets how many workers the process runs: one per resource
// instance, each running one task at a time. Defaults to DefaultWorkers().
func WithWorkers(n int) ServeOption {
	return func(c *serveConfig) error {
		if n < 1 {
			return invalid("workers must be at least 1, got %d", n)
		}
		c.workers = n
		return nil
	}
}

// WithMode sets how the server ends: ModeServe (the default) or
// ModeDrain. Server.SetMode changes it while the server runs.
func WithMode(m Mode) ServeOption {
	return func(c *serveConfig) error {
		if m != ModeServe && m != ModeDrain {
			return invalid("unknown mode %d", int32(m))
		}
		c.mode = m
		return nil
	}
}

// WithConcurrencyLimit makes the number of tasks this process runs at
// once follow alg, fed with every attempt's handler time, an attempt that
// ended with RetryLater or its timeout counting as a drop (the
// downstream is overloaded). A nil alg is limit.Gradient2 starting at
// floor, fed the p90 handler time of windows of 50ms or more (see
// BENCHMARKS.md, scenario T6, for how it follows a downstream's
// capacity). The limit applies before the take: a task the limit does not
// allow is not taken off Redis (it stays available to other processes).
// The process runs at least floor tasks at once (1 to the workers) and
// never more than its workers with an open resource. WithPrefetch must
// be 0 with it. Server.Limit reports the current limit; the process's
// record (Stats, shepherd queue stats) and the gauge
// shepherd.queue.limit show it too. It is WithLimit with a Limit of the
// server's own, kept between floor and the workers.
func WithConcurrencyLimit(alg limit.Algorithm, floor int) ServeOption {
	return func(c *serveConfig) error {
		if floor < 1 {
			return invalid("the concurrency limit's floor must be at least 1, got %d", floor)
		}
		c.limitAlg, c.limitSet, c.limitFloor = alg, true, floor
		return nil
	}
}

// WithLimit makes the server run its tasks within l, shared with the
// other servers (of other queues, typically) that use it, in the named
// partition of l ("" for a Limit made without partitions). The limit
// applies before the take, like WithConcurrencyLimit's, and the server
// never runs more tasks at once than its workers. WithPrefetch must be 0
// with it, and it cannot be combined with WithConcurrencyLimit.
func WithLimit(l *Limit, partition string) ServeOption {
	return func(c *serveConfig) error {
		if l == nil {
			return invalid("nil Limit")
		}
		if _, ok := l.parts[partition]; !ok {
			return invalid("the Limit has no partition %q", partition)
		}
		c.shared, c.sharedPart = l, partition
		return nil
	}
}

// MaxPrefetch bounds WithPrefetch.
const MaxPrefetch = 10000

// WithPrefetch lets the process take exactly n tasks ahead of its
// workers (0: a task is taken only for an idle worker). Without it, the
// process takes ahead on its own, and only while the queue has a backlog
// for it: as many tasks as its workers end in about 5 ms at their recent
// run times, at most 8 per worker, so many short tasks go in bigger
// batches, and tasks that run longer than the workers times 5 ms are
// not taken ahead at all (see "Taking ahead" in docs/queue.md). A task taken
// ahead waits in the process for the first worker that ends its
// attempt, which starts it without a round trip to Redis; and the
// attempts' ends and the takes go in bigger batches. The costs:
//
//   - a task taken ahead is in flight for the rest of the cluster: an
//     idle worker elsewhere does not get it, and Inspect shows it running;
//   - its attempt counts from the take: if the process dies or is paused
//     past its TTL, that attempt counts as failed like the ones running
//     (Redis cannot tell which had started; a task that kills its process
//     must not come back forever), and the task goes to another process
//     after the TTL;
//   - Stop, and a task cancelled before it started, give it back (or end
//     it) without running it.
//
// Taken ahead on its own, a task that no worker picks up within 100 ms
// (every worker busy with something long) goes back to the queue, no
// attempt used; with WithPrefetch(n) it waits for a worker. Either way a
// pause of the queue or a tenant gives it back (see Pause). Use n > 0
// for short, numerous tasks; 0 when no task should ever wait in a busy
// process. n must be 0 to MaxPrefetch. Not with a concurrency limit
// (WithConcurrencyLimit, WithLimit), which takes nothing ahead.
func WithPrefetch(n int) ServeOption {
	return func(c *serveConfig) error {
		if n < 0 || n > MaxPrefetch {
			return invalid("prefetch must be 0 to %d, got %d", MaxPrefetch, n)
		}
		c.prefetch, c.prefetchSet = n, true
		return nil
	}
}

// WithBackoff sets the delay before a failed task's next attempt:
// base·2^(attempt-1), capped at max, with jitter (a uniformly random
// delay between half of that and all of it). Defaults to 1s and 10m.
func WithBackoff(base, max time.Duration) ServeOption {
	return func(c *serveConfig) error {
		if base <= 0 || max < base {
			return invalid("backoff needs 0 < base <= max, got %v and %v", base, max)
		}
		c.backoffBase, c.backoffCap = base, max
		return nil
	}
}

// newLimit returns the server's limit and partition: WithLimit's, a new
// one for WithConcurrencyLimit, or none.
func (c *serveConfig) newLimit() (*Limit, *limitPart, error) {
	switch {
	case c.shared == nil && !c.limitSet:
		return nil, nil, nil
	case c.shared != nil && c.limitSet:
		return nil, nil, invalid("WithLimit and WithConcurrencyLimit cannot be combined")
	case c.prefetch > 0:
		return nil, nil, invalid("WithPrefetch must be 0 with a concurrency limit: a task taken ahead would bypass the limit")
	case c.shared != nil:
		return c.shared, c.shared.parts[c.sharedPart], nil
	case c.limitFloor > c.workers:
		return nil, nil, invalid("the concurrency limit's floor (%d) is above the workers (%d)", c.limitFloor, c.workers)
	}
	alg := c.limitAlg
	if alg == nil {
		g, err := defaultLimitAlgorithm(c.limitFloor, c.workers, nil)
		if err != nil {
			return nil, nil, err
		}
		alg = g
	}
	l, err := NewLimit(bounded{inner: alg, lo: c.limitFloor, hi: c.workers})
	if err != nil {
		return nil, nil, err
	}
	return l, l.parts[""], nil
}
