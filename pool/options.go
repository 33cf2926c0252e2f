package pool

import (
	"fmt"
	"io"
	"log/slog"
	"time"

	"go.opentelemetry.io/otel/metric"
)

// Defaults of the node options.
const (
	DefaultWorkerTTL            = 10 * time.Second
	DefaultPendingJobTTL        = 20 * time.Second
	DefaultWorkerShutdownTTL    = 2 * time.Minute
	DefaultMaxQueuedJobs        = 1000
	DefaultJobSinkBlockDuration = 5 * time.Second
	DefaultMaxPayloadSize       = 1 << 20
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

// WithWorkerTTL sets how long a worker may go without a keep-alive before
// the pool declares it dead and moves its jobs. Workers keep alive every
// TTL/3. Defaults to 10s.
func WithWorkerTTL(d time.Duration) NodeOption {
	return func(c *nodeConfig) error {
		if err := positive("WorkerTTL", d); err != nil {
			return err
		}
		c.workerTTL = d
		return nil
	}
}

// WithPendingJobTTL sets how long a routed start event may stay unacked
// (a worker picked the job up but has not started it) before it is routed
// again. Defaults to 20s.
func WithPendingJobTTL(d time.Duration) NodeOption {
	return func(c *nodeConfig) error {
		if err := positive("PendingJobTTL", d); err != nil {
			return err
		}
		c.pendingJobTTL = d
		return nil
	}
}

// WithWorkerShutdownTTL bounds how long Close and Shutdown wait for a
// worker's Stop handlers. Defaults to 2m.
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
// trimmed. Defaults to 1000.
func WithMaxQueuedJobs(n int) NodeOption {
	return func(c *nodeConfig) error {
		if n < 1 {
			return fmt.Errorf("%w: MaxQueuedJobs must be at least 1, got %d", ErrInvalidOption, n)
		}
		c.maxQueuedJobs = n
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
