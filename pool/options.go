package pool

import (
	"fmt"
	"io"
	"log/slog"
	"time"

	"go.opentelemetry.io/otel/metric"
	"go.opentelemetry.io/otel/trace"

	"github.com/shepherd-go/shepherd/internal/member"
	"github.com/shepherd-go/shepherd/internal/replica"
	"github.com/shepherd-go/shepherd/limit"
)

// Defaults and bounds of the node options. Below MinWorkerTTL, a
// keep-alive delayed by a busy machine (a GC pause, a loaded Redis) would
// get a healthy worker declared dead.
const (
	DefaultWorkerTTL            = 10 * time.Second
	DefaultPendingJobTTL        = 20 * time.Second
	DefaultWorkerShutdownTTL    = 2 * time.Minute
	DefaultMaxQueuedJobs        = 1000
	DefaultJobSinkBlockDuration = 5 * time.Second
	DefaultMaxPayloadSize       = 1 << 20
	DefaultCallTimeout          = 10 * time.Second
	MinWorkerTTL                = time.Second
	MinPendingJobTTL            = 500 * time.Millisecond
	// MaxKeySize is the longest job key, in bytes.
	MaxKeySize = 1024
)

// NodeOption configures a node in AddNode.
type NodeOption func(*nodeConfig) error

type nodeConfig struct {
	logger            *slog.Logger
	workerTTL         time.Duration
	pendingJobTTL     time.Duration
	workerShutdownTTL time.Duration
	maxQueuedJobs     int
	maxPayloadSize    int
	clientOnly        bool
	sinkBlock         time.Duration
	meterProvider     metric.MeterProvider // nil: no metrics
	tracer            trace.Tracer         // WithTracerProvider (trace.go); nil: no traces
	dispatchAlg       limit.Algorithm      // WithDispatchLimit's (nil: the default AIMD)
	dispatchLimit     bool
	dispatchWait      time.Duration
	callTimeout       time.Duration // WithCallTimeout (calltimeout.go)
	ack               replica.Ack   // WithReplicas (replicas.go)
	identity          string        // WithNodeID (identity.go); "" for none
	restartGrace      time.Duration // WithRestartGrace
	graceSet          bool
	name              string // WithName: the node's name for operators

	// set records which pool-wide settings the options gave explicitly:
	// those must agree with the pool's (settings.go).
	set struct{ workerTTL, pendingJobTTL, maxQueuedJobs, shards bool }

	shards int // WithShards (shard.go)
}

func defaultNodeConfig() nodeConfig {
	return nodeConfig{
		logger:            slog.New(slog.NewTextHandler(io.Discard, nil)),
		workerTTL:         DefaultWorkerTTL,
		pendingJobTTL:     DefaultPendingJobTTL,
		workerShutdownTTL: DefaultWorkerShutdownTTL,
		maxQueuedJobs:     DefaultMaxQueuedJobs,
		maxPayloadSize:    DefaultMaxPayloadSize,
		sinkBlock:         DefaultJobSinkBlockDuration,
		callTimeout:       DefaultCallTimeout,
		restartGrace:      DefaultRestartGrace,
		shards:            1,
	}
}

func positive(name string, d time.Duration) error {
	if d <= 0 {
		return fmt.Errorf("%w: %s must be positive, got %v", ErrInvalidOption, name, d)
	}
	return nil
}

// WithLogger sets the node's logger. Defaults to a logger that discards
// everything.
func WithLogger(l *slog.Logger) NodeOption {
	return func(c *nodeConfig) error {
		if l == nil {
			return fmt.Errorf("%w: nil logger", ErrInvalidOption)
		}
		c.logger = l
		return nil
	}
}

// atLeast returns an error wrapping ErrInvalidOption when d < lower.
func atLeast(name string, d, lower time.Duration) error {
	if d < lower {
		return fmt.Errorf("%w: %s must be at least %v, got %v", ErrInvalidOption, name, lower, d)
	}
	return nil
}

// WithWorkerTTL sets how long a worker or node may go without a
// keep-alive (by Redis's clock) before the pool declares it dead: its jobs
// then start elsewhere, and what it held or was about to receive is taken
// from it, so a paused or cut-off process holds no job for longer than
// about WorkerTTL + 1s. Nodes keep alive every TTL/3. It is a pool-wide
// setting: the pool's first full node stores it, and AddNode refuses a
// node that sets another value while another full node is live (see
// AddNode). At least MinWorkerTTL (1s). Defaults to 10s.
func WithWorkerTTL(d time.Duration) NodeOption {
	return func(c *nodeConfig) error {
		if err := atLeast("WorkerTTL", d, MinWorkerTTL); err != nil {
			return err
		}
		c.workerTTL, c.set.workerTTL = d, true
		return nil
	}
}

// WithPendingJobTTL sets how long a start may take: a job not claimed by
// its live worker, or whose Start has not returned, within d is routed
// again (after 3 such Starts its DispatchJob fails with a *StartError).
// It is the ctx of Start and of HandleNotification. It is a pool-wide
// setting, like WorkerTTL. At least MinPendingJobTTL (500ms). Defaults to
// 20s.
//
// It also bounds the claim and record around a start, and is the
// routers' acknowledgement grace (a backstop: a dead router's events are
// taken over as soon as its node is declared dead).
func WithPendingJobTTL(d time.Duration) NodeOption {
	return func(c *nodeConfig) error {
		if err := atLeast("PendingJobTTL", d, MinPendingJobTTL); err != nil {
			return err
		}
		c.pendingJobTTL, c.set.pendingJobTTL = d, true
		return nil
	}
}

// WithWorkerShutdownTTL bounds every call of a Stop handler (the Stop
// handler's ctx): StopJob's, a move's, RemoveWorker's, Close's and
// Shutdown's. A Stop that ignores its ctx is left running, and a later
// Start of the same key on that worker waits for it. Defaults to 2m.
func WithWorkerShutdownTTL(d time.Duration) NodeOption {
	return func(c *nodeConfig) error {
		if err := positive("WorkerShutdownTTL", d); err != nil {
			return err
		}
		c.workerShutdownTTL = d
		return nil
	}
}

// WithMaxQueuedJobs bounds the jobs waiting in the pool's job stream.
// DispatchJob beyond it fails with ErrPoolFull; queued jobs are never
// trimmed. It is a pool-wide setting, like WorkerTTL. Defaults to 1000.
func WithMaxQueuedJobs(n int) NodeOption {
	return func(c *nodeConfig) error {
		if n < 1 {
			return fmt.Errorf("%w: MaxQueuedJobs must be at least 1, got %d", ErrInvalidOption, n)
		}
		c.maxQueuedJobs, c.set.maxQueuedJobs = n, true
		return nil
	}
}

// WithMaxPayloadSize bounds job and notification payloads, in bytes.
// Defaults to 1 MiB.
func WithMaxPayloadSize(n int) NodeOption {
	return func(c *nodeConfig) error {
		if n < 1 {
			return fmt.Errorf("%w: MaxPayloadSize must be at least 1, got %d", ErrInvalidOption, n)
		}
		c.maxPayloadSize = n
		return nil
	}
}

// MaxNameSize is the longest WithName, in bytes.
const MaxNameSize = member.MaxNameSize

// WithName names the node for operators: Stats' NodeStats.Name, the
// dashboard and the CLI show it beside its host and PID ("ingest-2
// (web-1:4121)"), the id staying its key. A name need not be unique.
// An empty name, one longer than MaxNameSize bytes or one with a
// control character is refused. Defaults to none: host and PID alone.
func WithName(name string) NodeOption {
	return func(c *nodeConfig) error {
		if err := member.CheckName(name); err != nil {
			return fmt.Errorf("%w: node %w", ErrInvalidOption, err)
		}
		c.name = name
		return nil
	}
}

// WithClientOnly makes the node a client: it can dispatch, stop and notify
// jobs and shut the pool down, but it routes no jobs and hosts no workers
// (AddWorker fails). Defaults to off.
func WithClientOnly() NodeOption {
	return func(c *nodeConfig) error {
		c.clientOnly = true
		return nil
	}
}

// WithJobSinkBlockDuration sets how long the node's routing loop blocks on
// the job stream per read. Defaults to 5s. Close does not wait for it.
func WithJobSinkBlockDuration(d time.Duration) NodeOption {
	return func(c *nodeConfig) error {
		if err := positive("JobSinkBlockDuration", d); err != nil {
			return err
		}
		c.sinkBlock = d
		return nil
	}
}

// WithMeterProvider makes the node report its metrics (the Metric*
// constants) through mp, an OpenTelemetry MeterProvider. The node then
// also reads the queue depth and the number of workers once per janitor
// tick (one pipelined round trip, at most every 250ms). Defaults to none:
// the instruments are no-ops and cost nothing.
func WithMeterProvider(mp metric.MeterProvider) NodeOption {
	return func(c *nodeConfig) error {
		if mp == nil {
			return fmt.Errorf("%w: nil MeterProvider", ErrInvalidOption)
		}
		c.meterProvider = mp
		return nil
	}
}

// Defaults of WithDispatchLimit's algorithm (nil alg): an AIMD limit of
// concurrent DispatchJob calls.
const (
	DefaultDispatchLimitInitial = 16
	DefaultDispatchLimitMax     = 1024
	// DefaultDispatchSlow is the admission time above which a dispatch
	// counts as a drop: Redis is slow.
	DefaultDispatchSlow = 100 * time.Millisecond
)

// WithDispatchLimit puts DispatchJob behind a limit of concurrent calls
// in this node, so that producers back off when the pool pushes back
// instead of hammering it. A call waits in line (first come, first
// served) up to wait for a permit, then fails with an error wrapping
// limit.ErrLimitExceeded, having sent nothing; its ctx is honoured while
// it waits. A permit is held for the whole call, up to the job's start.
//
// alg learns from each admission (the Redis call that queues the job):
// its time is the sample; ErrPoolFull, a Redis error or timeout (not a
// cancelled ctx) and, for the default, an admission slower than
// DefaultDispatchSlow are drops. A nil alg is limit.AIMD from
// DefaultDispatchLimitInitial, between 1 and DefaultDispatchLimitMax,
// backing off by 10% at a drop. Node.DispatchLimit reports the limit.
// wait must be positive.
func WithDispatchLimit(alg limit.Algorithm, wait time.Duration) NodeOption {
	return func(c *nodeConfig) error {
		if err := positive("dispatch limit wait", wait); err != nil {
			return err
		}
		c.dispatchAlg, c.dispatchLimit, c.dispatchWait = alg, true, wait
		return nil
	}
}

// newDispatchLimiter returns the blocking limiter of WithDispatchLimit,
// or nil without it.
func (c *nodeConfig) newDispatchLimiter() (*limit.Blocking, error) {
	if !c.dispatchLimit {
		return nil, nil
	}
	alg := c.dispatchAlg
	if alg == nil {
		a, err := limit.NewAIMD(limit.WithAIMDInitial(DefaultDispatchLimitInitial), limit.WithAIMDMax(DefaultDispatchLimitMax),
			limit.WithAIMDTimeout(DefaultDispatchSlow))
		if err != nil {
			return nil, fmt.Errorf("%w: %w", ErrInvalidOption, err)
		}
		alg = a
	}
	s, err := limit.NewSimple(alg)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrInvalidOption, err)
	}
	b, err := limit.NewBlocking(s, limit.WithBlockingTimeout(c.dispatchWait))
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrInvalidOption, err)
	}
	return b, nil
}
