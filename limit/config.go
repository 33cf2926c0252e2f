package limit

import (
	"context"
	"time"
)

// Defaults of the limiters.
const (
	// DefaultIdleWindow is how long a Partitioned limiter keeps the unused
	// part of a partition's share reserved after refusing it a request.
	DefaultIdleWindow = time.Second
)

// LimiterOption configures a Simple or a Partitioned limiter. Options
// marked "Partitioned only" make NewSimple return ErrInvalidOption.
type LimiterOption func(*limiterConfig)

type limiterConfig struct {
	now         func() time.Time
	clockSet    bool
	idle        time.Duration
	resolver    func(context.Context) string
	partitions  []partitionSpec
	partitioned bool // a Partitioned-only option was given
}

type partitionSpec struct {
	name  string
	share float64
}

func newLimiterConfig(opts []LimiterOption) *limiterConfig {
	c := &limiterConfig{idle: DefaultIdleWindow, resolver: PartitionFromContext}
	for _, o := range opts {
		o(c)
	}
	return c
}

// WithClock sets the clock that measures RTTs (and, for Partitioned, how
// recently a partition was refused). Defaults to the monotonic clock of
// time.Now.
func WithClock(now func() time.Time) LimiterOption {
	return func(c *limiterConfig) { c.now, c.clockSet = now, true }
}

// WithPartition adds a named partition with a guaranteed share in (0, 1]
// of the limit. The shares of all partitions must add up to at most 1.
// Partitioned only.
func WithPartition(name string, share float64) LimiterOption {
	return func(c *limiterConfig) {
		c.partitions = append(c.partitions, partitionSpec{name: name, share: share})
		c.partitioned = true
	}
}

// WithResolver sets the function that maps a request's context to its
// partition name. Defaults to PartitionFromContext. Partitioned only.
func WithResolver(f func(ctx context.Context) string) LimiterOption {
	return func(c *limiterConfig) { c.resolver, c.partitioned = f, true }
}

// WithIdleWindow sets how long after being refused a request a partition
// keeps the unused part of its share reserved against borrowers. Defaults
// to DefaultIdleWindow. Partitioned only.
func WithIdleWindow(d time.Duration) LimiterOption {
	return func(c *limiterConfig) { c.idle, c.partitioned = d, true }
}

type partitionKey struct{}

// ContextWithPartition returns a copy of ctx that PartitionFromContext
// resolves to name.
func ContextWithPartition(ctx context.Context, name string) context.Context {
	return context.WithValue(ctx, partitionKey{}, name)
}

// PartitionFromContext returns the partition name stored by
// ContextWithPartition, or "" (no partition: excess capacity only).
func PartitionFromContext(ctx context.Context) string {
	name, _ := ctx.Value(partitionKey{}).(string)
	return name
}
