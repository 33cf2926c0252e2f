package limit

import (
	"context"
	"math"
	"sync"
	"time"
)

// Partitioned is a Limiter whose limit is shared by named partitions, each
// with a guaranteed share of it (for example live 0.9 and batch 0.1).
//
// A request is admitted while the total in-flight count stays within the
// limit minus the unused, reserved part of the other partitions' shares
// (in whole slots: a partition is guaranteed floor(share × limit)). A
// partition reserves the unused part of its share only for the idle window
// after it was refused a request, that is only while it has demand it
// cannot place. So:
//
//   - a partition may use more than its share while the others do not need
//     theirs (borrowing), up to the whole limit;
//   - once a partition with unmet demand is refused, borrowers are refused
//     the capacity it is owed, and as their requests finish the capacity
//     goes to it: under contention every partition gets its share;
//   - a request of an unknown partition (share 0) uses only capacity
//     reserved by nobody;
//   - the total in-flight count never exceeds the limit at admission.
//
// The resolver maps a request's context to its partition; AcquirePartition
// takes the name directly (a key, a header value). Admission takes a
// mutex and costs O(partitions). Safe for concurrent use.
type Partitioned struct {
	adaptive
	resolver func(context.Context) string
	idle     time.Duration

	pmu    sync.Mutex
	parts  []partition // named partitions, then the unknown partition
	byName map[string]int
	total  int
}

type partition struct {
	share     float64
	inFlight  int
	refusedAt time.Duration // clock reading
	refused   bool
}

// NewPartitioned returns a Partitioned limiter driven by alg, which it then
// owns, with the partitions given by WithPartition. It returns an error
// wrapping ErrInvalidOption for a nil alg, clock or resolver, no partition,
// an empty or repeated name, a share outside (0, 1], shares adding up to
// more than 1, or an idle window <= 0.
func NewPartitioned(alg Algorithm, opts ...LimiterOption) (*Partitioned, error) {
	c := newLimiterConfig(opts)
	switch {
	case alg == nil:
		return nil, invalidf("algorithm is nil")
	case (c.clockSet && c.now == nil) || c.resolver == nil:
		return nil, invalidf("clock or resolver is nil")
	case len(c.partitions) == 0:
		return nil, invalidf("Partitioned needs at least one WithPartition")
	}
	if err := checkPositive("idle window", c.idle); err != nil {
		return nil, err
	}
	p := &Partitioned{resolver: c.resolver, idle: c.idle, byName: make(map[string]int)}
	sum := 0.0
	for i, s := range c.partitions {
		if _, dup := p.byName[s.name]; dup || s.name == "" {
			return nil, invalidf("partition name %q is empty or repeated", s.name)
		}
		if err := checkRatio("partition share", s.share, 0, 1); err != nil {
			return nil, err
		}
		sum += s.share
		p.byName[s.name] = i
		p.parts = append(p.parts, partition{share: s.share})
	}
	if sum > 1+1e-9 {
		return nil, invalidf("partition shares add up to %g > 1", sum)
	}
	p.parts = append(p.parts, partition{}) // unknown
	p.init(alg, clock{now: c.now})
	return p, nil
}

// Acquire is TryAcquire: Partitioned never waits.
func (p *Partitioned) Acquire(ctx context.Context) (Token, error) { return p.TryAcquire(ctx) }

// TryAcquire admits a request of the partition the resolver maps ctx to.
func (p *Partitioned) TryAcquire(ctx context.Context) (Token, error) {
	return p.AcquirePartition(ctx, p.resolver(ctx))
}

// AcquirePartition admits a request of the named partition; an unknown
// name gets only unreserved capacity. It never waits.
func (p *Partitioned) AcquirePartition(ctx context.Context, name string) (Token, error) {
	return p.acquire(ctx, name, true)
}

// AcquirePartitionQuietly is AcquirePartition, except that a refusal
// does not reserve the partition's share. It is for callers that ask
// before they know whether they have work (a queue takes its permits
// before it looks for tasks): an idle partition polling for work must not
// hold its share back from borrowers. Such a caller reports its unmet
// demand with Want once it knows of it.
func (p *Partitioned) AcquirePartitionQuietly(ctx context.Context, name string) (Token, error) {
	return p.acquire(ctx, name, false)
}

// Want reserves the unused part of the named partition's share for the
// idle window, as a refusal by AcquirePartition does: the partition has
// work it could not place.
func (p *Partitioned) Want(name string) {
	i, ok := p.byName[name]
	if !ok {
		i = len(p.parts) - 1
	}
	now := p.clock.read()
	p.pmu.Lock()
	p.parts[i].refused, p.parts[i].refusedAt = true, now
	p.pmu.Unlock()
}

func (p *Partitioned) acquire(ctx context.Context, name string, reserve bool) (Token, error) {
	if err := ctx.Err(); err != nil {
		return Token{}, err
	}
	i, ok := p.byName[name]
	if !ok {
		i = len(p.parts) - 1
	}
	now := p.clock.read()
	limit := float64(p.limit.Load())
	p.pmu.Lock()
	defer p.pmu.Unlock()
	reserved := 0.0
	for j := range p.parts {
		q := &p.parts[j]
		if j != i && q.refused && now-q.refusedAt < p.idle {
			// Whole slots only: a fraction of a slot (0.1 of a limit of
			// 1) reserved by each of two refused partitions would refuse
			// both for ever. The epsilon keeps float shares like 0.9×100
			// from losing a slot by rounding.
			reserved += max(0, math.Floor(q.share*limit+1e-9)-float64(q.inFlight))
		}
	}
	if float64(p.total+1) > limit-reserved {
		if reserve {
			p.parts[i].refused, p.parts[i].refusedAt = true, now
		}
		return Token{}, ErrLimitExceeded
	}
	p.total++
	p.parts[i].inFlight++
	return newToken(p, held{start: now, inFlight: p.total, part: i}), nil
}

func (p *Partitioned) release(h held, o outcome) {
	p.update(h, o)
	p.pmu.Lock()
	p.total--
	p.parts[h.part].inFlight--
	p.pmu.Unlock()
}

// Limit returns the current limit.
func (p *Partitioned) Limit() int { return int(p.limit.Load()) }

// InFlight returns the total number of admitted requests not yet released.
func (p *Partitioned) InFlight() int {
	p.pmu.Lock()
	defer p.pmu.Unlock()
	return p.total
}

// Partitions returns the names of the partitions, in the order given.
func (p *Partitioned) Partitions() []string {
	names := make([]string, len(p.byName))
	for name, i := range p.byName {
		names[i] = name
	}
	return names
}

// Share returns the named partition's guaranteed share, and whether the
// partition exists.
func (p *Partitioned) Share(name string) (float64, bool) {
	i, ok := p.byName[name]
	if !ok {
		return 0, false
	}
	return p.parts[i].share, true
}

// PartitionInFlight returns the in-flight count of the named partition;
// any unknown name reports the requests of unknown partitions.
func (p *Partitioned) PartitionInFlight(name string) int {
	i, ok := p.byName[name]
	if !ok {
		i = len(p.parts) - 1
	}
	p.pmu.Lock()
	defer p.pmu.Unlock()
	return p.parts[i].inFlight
}
