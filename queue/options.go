package queue

import (
	"fmt"
	"io"
	"log/slog"
	"runtime"
	"time"

	"go.opentelemetry.io/otel/metric"

	"github.com/shepherd-go/shepherd/limit"
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

	// set records the queue-wide settings given explicitly: they must
	// agree with the queue's (settings.go).
	set struct{ ttl, maxQueued, maxDead bool }
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
	}
}

func invalid(format string, args ...any) error {
	return fmt.Errorf("%w: "+format, append([]any{ErrInvalidOption}, args...)...)
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

// SubmitOption configures one Submit.
type SubmitOption func(*submitConfig) error

type submitConfig struct {
	id          string
	tenant      string
	batch       string // set by Batch.Submit
	policy      Policy
	delay       time.Duration
	dueAt       time.Time
	maxAttempts int
	timeout     time.Duration
	retention   time.Duration
}

func defaultSubmitConfig() submitConfig {
	return submitConfig{maxAttempts: DefaultMaxAttempts, timeout: DefaultTimeout, retention: DefaultRetention}
}

// WithTaskID sets the task's id (1 to MaxTaskIDSize bytes). Submit refuses
// an id the queue still knows with ErrDuplicateTask, which makes a retried
// Submit safe. Defaults to a random id.
func WithTaskID(id string) SubmitOption {
	return func(c *submitConfig) error {
		if err := validID(id); err != nil {
			return err
		}
		c.id = id
		return nil
	}
}

// MaxTenantIDSize bounds a tenant id.
const MaxTenantIDSize = 256

// WithTenant submits the task for a tenant: it runs only while the
// tenant has fewer tasks in flight (and Acquire slots held) than its
// capacity, and tenants with waiting tasks take turns. The tenant must be
// registered (SetTenant), else Submit fails with ErrUnknownTenant and
// writes nothing. Defaults to none: the task is not capped.
func WithTenant(id string) SubmitOption {
	return func(c *submitConfig) error {
		if err := validTenant(id); err != nil {
			return err
		}
		c.tenant = id
		return nil
	}
}

func validTenant(id string) error {
	if id == "" || len(id) > MaxTenantIDSize {
		return invalid("tenant id must be 1 to %d bytes, got %d", MaxTenantIDSize, len(id))
	}
	return nil
}

// WithDelay makes the task available d after Submit, by Redis's clock.
// Defaults to 0: at once.
func WithDelay(d time.Duration) SubmitOption {
	return func(c *submitConfig) error {
		if d < 0 {
			return invalid("delay must not be negative, got %v", d)
		}
		c.delay, c.dueAt = d, time.Time{}
		return nil
	}
}

// WithDueAt makes the task available at t. t is turned into a delay with
// this process's clock at Submit; a t in the past means at once.
func WithDueAt(t time.Time) SubmitOption {
	return func(c *submitConfig) error {
		if t.IsZero() {
			return invalid("zero due time")
		}
		c.dueAt, c.delay = t, 0
		return nil
	}
}

// WithMaxAttempts sets how many attempts a task gets before it becomes a
// dead letter (a process that dies or stops answering during an attempt
// uses it up too). 1 to MaxAttempts. Defaults to 25.
func WithMaxAttempts(n int) SubmitOption {
	return func(c *submitConfig) error {
		if n < 1 || n > MaxAttempts {
			return invalid("max attempts must be 1 to %d, got %d", MaxAttempts, n)
		}
		c.maxAttempts = n
		return nil
	}
}

// WithTimeout bounds each attempt: the handler's ctx ends after d, and an
// attempt whose handler returns at or after that deadline has failed,
// even when it returns a result: the result is dropped, the worker's
// resource is reset, and the task is retried under its policy (a dead
// letter after its max attempts). Lateness is judged by when the handler
// returned (the process's monotonic clock), not by when its return is
// recorded: a handler that returns before the deadline is in time.
// Defaults to 1m.
func WithTimeout(d time.Duration) SubmitOption {
	return func(c *submitConfig) error {
		if d <= 0 {
			return invalid("timeout must be positive, got %v", d)
		}
		c.timeout = d
		return nil
	}
}

// WithRetention sets how long the task's outcome (result or final error)
// is kept once it is finished, for Result and for duplicate-id checks.
// Dead letters are kept until replayed, purged or dropped at the
// MaxDeadLetters bound. At least 1ms. Defaults to 24h.
func WithRetention(d time.Duration) SubmitOption {
	return func(c *submitConfig) error {
		if d < time.Millisecond {
			return invalid("retention must be at least 1ms, got %v", d)
		}
		c.retention = d
		return nil
	}
}

// ServeOption configures Serve.
type ServeOption func(*serveConfig) error

type serveConfig struct {
	workers     int
	prefetch    int
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
	return serveConfig{workers: DefaultWorkers(), backoffBase: DefaultBackoffBase, backoffCap: DefaultBackoffCap}
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

// WithPrefetch lets the process take up to n tasks ahead of its workers
// (0, the default: a task is taken only for an idle worker). A task taken
// ahead waits in the process for the first worker that ends its attempt,
// which starts it without a round trip to Redis; and the attempts' ends
// and the takes go in bigger batches. With many short tasks that is
// faster (see BENCHMARKS.md, scenario T1); the costs:
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
// Use it for short, numerous tasks; leave it at 0 for long or costly
// ones. n must be 0 to MaxPrefetch.
func WithPrefetch(n int) ServeOption {
	return func(c *serveConfig) error {
		if n < 0 || n > MaxPrefetch {
			return invalid("prefetch must be 0 to %d, got %d", MaxPrefetch, n)
		}
		c.prefetch = n
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
