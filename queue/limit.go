package queue

import (
	"context"
	"fmt"
	"math"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/shepherd-go/shepherd/limit"
)

// Limit is a concurrency limit shared by servers of one process: the
// tasks they run at once, together, follow one limit.Algorithm, fed with
// every attempt's handler time (an attempt that ended with RetryLater or
// its timeout counts as a drop: the downstream is overloaded).
//
// Each server is in a partition (WithLimit) with a guaranteed share of
// the limit, by limit.Partitioned's rules: a partition may borrow what
// the others leave idle, up to the whole limit; once a partition with
// tasks waiting is refused, borrowers are refused its share and it gets
// it back as their tasks end. A server takes permits before it takes
// tasks off Redis, each permit admitted under the limiter's lock, so
// servers racing never run more than the limit together, and a task the
// limit does not allow stays in Redis for other processes.
//
// A Limit is used by the servers of this process only; several
// processes each have their own. Safe for concurrent use.
type Limit struct {
	p     *limit.Partitioned
	parts map[string]*limitPart // by the name servers give

	mu    sync.Mutex
	freed chan struct{} // closed, and replaced, when a permit was released
}

type limitPart struct {
	pub   string // the name servers give
	name  string // in p
	share float64
	drops atomic.Int64
}

// soleLimitPartition names the one partition of a Limit made without
// partitions, which servers join as "".
const soleLimitPartition = "\x00all"

// NewLimit returns a Limit driven by alg, which it then owns (nil: the
// default of WithConcurrencyLimit, from 1 to 1000). opts are
// limit.WithPartition (a name and a guaranteed share; the shares add up
// to at most 1), limit.WithIdleWindow (how long a refused partition
// keeps its unused share reserved, 1s by default) and limit.WithClock.
// Without partitions the limit has one, named "", that every server
// joins. Errors wrap ErrInvalidOption.
func NewLimit(alg limit.Algorithm, opts ...limit.LimiterOption) (*Limit, error) {
	if alg == nil {
		g, err := defaultLimitAlgorithm(1, 1000, nil)
		if err != nil {
			return nil, err
		}
		alg = g
	}
	probe, err := limit.NewPartitioned(alg, opts...)
	sole := false
	if err != nil {
		// Without partitions, one for all. (Any other error is found
		// again: NewPartitioned checks the partitions last, and the added
		// one comes after the caller's.)
		opts = append(slices.Clip(opts), limit.WithPartition(soleLimitPartition, 1))
		if probe, err = limit.NewPartitioned(alg, opts...); err != nil {
			return nil, fmt.Errorf("%w: %w", ErrInvalidOption, err)
		}
		sole = true
	}
	l := &Limit{p: probe, parts: make(map[string]*limitPart), freed: make(chan struct{})}
	for _, name := range probe.Partitions() {
		share, _ := probe.Share(name)
		pub := name
		if sole {
			pub = ""
		}
		l.parts[pub] = &limitPart{pub: pub, name: name, share: share}
	}
	return l, nil
}

// defaultLimitAlgorithm is the algorithm of a nil alg: Gradient2 from lo
// to hi, starting at lo, fed one sample per window (limit.Windowed: the
// p90 handler time of windows of at least 50ms and 40 attempts), with a
// headroom of max(0.5, √limit/4), rising without smoothing and falling
// with a smoothing of 0.3.
//
// Chosen with bench scenario T6 (BENCHMARKS.md), against Gradient2's own
// defaults fed every attempt:
//   - the start at the floor cannot overshoot a small downstream;
//   - windows: an update per attempt reacts to single slow attempts (the
//     scheduler, a GC) and settled well below the capacity (0.67 of the
//     best fixed throughput at a capacity of 32); 40 attempts a window
//     keep a window's p90 steady at low rates;
//   - the limit settles about a headroom above the capacity: Gradient2's
//     default headroom (at least 2) is half of a capacity of 4, this one
//     is 0.5 to 1.4 slots up to a capacity of 32;
//   - a smaller headroom grows the limit more slowly: no smoothing on the
//     way up (the windows smooth already) keeps the start within 2 to 4
//     seconds;
//   - on the way down, a stall of the VM for a few windows (every task
//     looks twice as slow) halved the limit each window, from 35 to 3,
//     and it took 3s to grow back: falling at most 15% a window rides
//     over a stall, and a lasting overload still halves it at once
//     (Gradient2's divergence cut).
//
// A drop (RetryLater, a timeout) makes the window's sample a drop: the
// limit falls by 15%, and the drop's own time (often near zero for a
// downstream that refuses at once) never enters the averages, so fast
// refusals cannot look like a fast downstream.
func defaultLimitAlgorithm(lo, hi int, now func() time.Time) (limit.Algorithm, error) {
	g, err := limit.NewGradient2(limit.WithGradient2Initial(lo), limit.WithGradient2Min(lo), limit.WithGradient2Max(hi),
		limit.WithGradient2Headroom(func(l float64) float64 { return max(0.5, math.Sqrt(l)/4) }),
		limit.WithGradient2Smoothing(1), limit.WithGradient2DownSmoothing(0.3))
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrInvalidOption, err)
	}
	opts := []limit.WindowedOption{limit.WithWindowPercentile(0.9), limit.WithWindowBounds(50*time.Millisecond, time.Second), limit.WithWindowMinSamples(40)}
	if now != nil {
		opts = append(opts, limit.WithWindowClock(now))
	}
	w, err := limit.NewWindowed(g, opts...)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrInvalidOption, err)
	}
	return w, nil
}

// Limit returns the current limit: the tasks the servers sharing it may
// run at once, together.
func (l *Limit) Limit() int { return l.p.Limit() }

// InFlight returns the tasks the servers sharing the limit run (or have
// taken to run) now.
func (l *Limit) InFlight() int { return l.p.InFlight() }

// LimitPartition is what Partitions reports of one partition.
type LimitPartition struct {
	Name     string
	Share    float64 // guaranteed share of the limit
	InFlight int     // its servers' tasks running (or taken to run) now
	Drops    int64   // its attempts that counted as drops, since NewLimit
}

// Partitions returns the limit's partitions, by name.
func (l *Limit) Partitions() []LimitPartition {
	out := make([]LimitPartition, 0, len(l.parts))
	for pub, p := range l.parts {
		out = append(out, LimitPartition{Name: pub, Share: p.share, InFlight: l.p.PartitionInFlight(p.name), Drops: p.drops.Load()})
	}
	slices.SortFunc(out, func(a, b LimitPartition) int {
		switch {
		case a.Name < b.Name:
			return -1
		case a.Name > b.Name:
			return 1
		}
		return 0
	})
	return out
}

// acquire admits up to n tasks of the partition, each under the
// limiter's lock, and returns their permits (none when the limit or the
// partition's share is reached). When the partition has work waiting
// (demand) and gets fewer than n, its share is reserved (limit.Partitioned
// Want): borrowers are refused it from now on. Without known demand a
// refusal reserves nothing: a server with an empty queue asks for
// permits for all its idle workers whenever it looks for tasks, and must
// not hold its share back from the servers that have work.
func (l *Limit) acquire(p *limitPart, n int, demand bool) []limit.Token {
	var toks []limit.Token
	for range n {
		t, err := l.p.AcquirePartitionQuietly(context.Background(), p.name)
		if err != nil {
			break
		}
		toks = append(toks, t)
	}
	if demand && len(toks) < n {
		l.p.Want(p.name)
	}
	return toks
}

// released returns a channel closed at the next release of a permit.
func (l *Limit) released() <-chan struct{} {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.freed
}

// free wakes the servers waiting for a permit.
func (l *Limit) free() {
	l.mu.Lock()
	close(l.freed)
	l.freed = make(chan struct{})
	l.mu.Unlock()
}

// finish releases an attempt's permit: its handler time and whether it
// counts as a drop feed the algorithm; an attempt that tells nothing
// (not run, cut off by a hard stop) only frees its permit.
func (p *limitPart) finish(t limit.Token, s *limit.Sample) {
	if s == nil {
		t.Ignore()
		return
	}
	if s.Dropped {
		p.drops.Add(1)
	}
	t.Report(s.RTT, s.Dropped)
}

// bounded keeps an algorithm's limit within [lo, hi].
type bounded struct {
	inner  limit.Algorithm
	lo, hi int
}

func (b bounded) Update(s limit.Sample) int { return min(max(b.inner.Update(s), b.lo), b.hi) }
func (b bounded) Limit() int                { return min(max(b.inner.Limit(), b.lo), b.hi) }
