package queue

import (
	"fmt"
	"io"
	"log/slog"
	"time"

	"github.com/shepherd-go/shepherd/internal/member"
	"github.com/shepherd-go/shepherd/internal/replica"
	"go.opentelemetry.io/otel/metric"
	"go.opentelemetry.io/otel/trace"
)

// Defaults of the options.
const (
	DefaultTTL            = 10 * time.Second
	DefaultMaxQueued      = 100_000
	DefaultMaxPayloadSize = 1 << 20
	DefaultMaxDeadLetters = 10_000
	DefaultMaxAttempts    = 25
	DefaultTimeout        = time.Minute
	DefaultRetention      = 24 * time.Hour
	DefaultBackoffBase    = time.Second
	DefaultBackoffCap     = 10 * time.Minute

	// MinTTL is the shortest TTL: a process keeps alive every TTL/3, and
	// below a second a busy machine gets healthy processes declared dead.
	MinTTL = time.Second
	// MaxTaskIDSize is the longest task id, in bytes.
	MaxTaskIDSize = 256
	// MaxAttempts is the largest WithMaxAttempts.
	MaxAttempts = 1000
	// MaxShards is the largest WithShards.
	MaxShards = 256
)

// Option configures Open.
type Option func(*config) error

type config struct {
	logger         *slog.Logger
	ttl            time.Duration
	maxQueued      int
	maxDead        int
	maxPayloadSize int
	acquireWait    time.Duration
	callTimeout    time.Duration // WithCallTimeout (calltimeout.go)
	meterProvider  metric.MeterProvider
	tracer         trace.Tracer // WithTracerProvider (trace.go), nil for none
	shards         int          // WithShards (shard.go)
	ack            replica.Ack  // WithReplicas (replicas.go)
	name           string       // WithName: the process's name for operators

	// set records the queue-wide settings given explicitly: they must
	// agree with the queue's (settings.go).
	set struct{ ttl, maxQueued, maxDead, shards bool }
}

func defaultConfig() config {
	return config{
		logger:         slog.New(slog.NewTextHandler(io.Discard, nil)),
		ttl:            DefaultTTL,
		maxQueued:      DefaultMaxQueued,
		maxDead:        DefaultMaxDeadLetters,
		acquireWait:    DefaultAcquireWait,
		callTimeout:    DefaultCallTimeout,
		maxPayloadSize: DefaultMaxPayloadSize,
		shards:         1,
	}
}

func invalid(format string, args ...any) error {
	return fmt.Errorf("%w: "+format, append([]any{ErrInvalidOption}, args...)...)
}

// MaxNameSize is the longest WithName, in bytes.
const MaxNameSize = member.MaxNameSize

// WithName names this process for operators: Stats' ProcessInfo.Name,
// the dashboard and the CLI show it beside its host and PID ("api-3
// (web-1:4121)"), the id staying its key. A name need not be unique.
// An empty name, one longer than MaxNameSize bytes or one with a
// control character is refused. Defaults to none: host and PID alone.
func WithName(name string) Option {
	return func(c *config) error {
		if err := member.CheckName(name); err != nil {
			return invalid("process %v", err)
		}
		c.name = name
		return nil
	}
}

// WithLogger sets the logger. Defaults to one that discards everything.
func WithLogger(l *slog.Logger) Option {
	return func(c *config) error {
		if l == nil {
			return invalid("nil logger")
		}
		c.logger = l
		return nil
	}
}

// WithTTL sets how long a process may go without a keep-alive (by Redis's
// clock) before the queue declares it dead and gives its tasks in flight
// to others: a killed, paused or cut-off process holds no task for longer
// than about TTL + 1s. Processes keep alive every TTL/3. It is a
// queue-wide setting, stored with the queue (see Open). At least MinTTL.
// Defaults to 10s.
func WithTTL(d time.Duration) Option {
	return func(c *config) error {
		if d < MinTTL {
			return invalid("TTL must be at least %v, got %v", MinTTL, d)
		}
		c.ttl, c.set.ttl = d, true
		return nil
	}
}

// WithMaxQueued bounds the unfinished tasks of the queue (waiting,
// delayed, retrying and in flight): Submit beyond it fails with
// ErrQueueFull. It is a queue-wide setting. Defaults to 100,000.
func WithMaxQueued(n int) Option {
	return func(c *config) error {
		if n < 1 {
			return invalid("MaxQueued must be at least 1, got %d", n)
		}
		c.maxQueued, c.set.maxQueued = n, true
		return nil
	}
}

// WithMaxDeadLetters bounds the dead letters kept: when a task fails
// finally with the bound reached, the oldest dead letter is deleted, the
// Stats field DeadDropped counts it and the process that dropped it logs a
// WARN. It is a queue-wide setting. Defaults to 10,000.
func WithMaxDeadLetters(n int) Option {
	return func(c *config) error {
		if n < 1 {
			return invalid("MaxDeadLetters must be at least 1, got %d", n)
		}
		c.maxDead, c.set.maxDead = n, true
		return nil
	}
}

// WithShards spreads the queue over n shards (1 to MaxShards): n copies
// of its key layout under n hash tags ("NAME", "NAME#1", ...), so that on
// Redis Cluster the queue's work is spread over up to n masters instead
// of one. A task's shard follows its tenant, else its batch, else its
// deduplication key, else its id (see the package's Sharding). It is a
// queue-wide setting, set when the queue is made: a process that sets
// another count on an existing queue is refused (ErrInvalidOption), live
// processes or not; Client.Reshard changes it while the queue is idle.
// Defaults to 1, the layout of an unsharded queue.
func WithShards(n int) Option {
	return func(c *config) error {
		if n < 1 || n > MaxShards {
			return invalid("shards must be 1 to %d, got %d", MaxShards, n)
		}
		c.shards, c.set.shards = n, true
		return nil
	}
}

// WithMaxPayloadSize bounds payloads and results, in bytes. Defaults to
// 1 MiB.
func WithMaxPayloadSize(n int) Option {
	return func(c *config) error {
		if n < 1 {
			return invalid("MaxPayloadSize must be at least 1, got %d", n)
		}
		c.maxPayloadSize = n
		return nil
	}
}

// WithAcquireWait sets how long Acquire waits for a slot of a tenant at
// capacity before it fails with ErrTenantBusy. Defaults to 5s.
func WithAcquireWait(d time.Duration) Option {
	return func(c *config) error {
		if d < 0 {
			return invalid("acquire wait must not be negative, got %v", d)
		}
		c.acquireWait = d
		return nil
	}
}

// WithMeterProvider reports the queue's metrics (see metrics.go) through
// mp. Defaults to none.
func WithMeterProvider(mp metric.MeterProvider) Option {
	return func(c *config) error {
		if mp == nil {
			return invalid("nil MeterProvider")
		}
		c.meterProvider = mp
		return nil
	}
}
