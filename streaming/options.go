package streaming

import (
	"fmt"
	"log/slog"
	"math"
	"strconv"
	"time"
)

// Defaults of the read options.
const (
	// DefaultBlockDuration is how long one read waits for new entries.
	DefaultBlockDuration = 5 * time.Second
	// DefaultMaxPolled is the most entries one read fetches.
	DefaultMaxPolled = 1000
	// DefaultBufferSize is the capacity of the channel Subscribe returns.
	DefaultBufferSize = 100
	// DefaultAckGracePeriod is how long a sink's entry may stay
	// unacknowledged before another consumer reclaims it.
	DefaultAckGracePeriod = 20 * time.Second
	// DefaultMinBackoff and DefaultMaxBackoff bound the wait before a read
	// loop retries after a Redis error; it doubles from min to max.
	DefaultMinBackoff = 100 * time.Millisecond
	DefaultMaxBackoff = 5 * time.Second
)

// fallbackBlock caps one blocking read on clients that cannot be given a
// dedicated connection, so that Close never waits longer for a read.
const fallbackBlock = 100 * time.Millisecond

// startKind says where a sink's group or a reader starts.
type startKind int

const (
	startDefault startKind = iota
	startOldest
	startNewest
	startAfter
)

type readConfig struct {
	block      time.Duration
	maxPolled  int64
	bufferSize int
	start      startKind
	startID    string // for startAfter: read entries with greater IDs
	logger     *slog.Logger
	onError    func(error)
	minBackoff time.Duration
	maxBackoff time.Duration
}

func defaultReadConfig() readConfig {
	return readConfig{
		block:      DefaultBlockDuration,
		maxPolled:  DefaultMaxPolled,
		bufferSize: DefaultBufferSize,
		logger:     slog.New(slog.DiscardHandler),
		onError:    func(error) {},
		minBackoff: DefaultMinBackoff,
		maxBackoff: DefaultMaxBackoff,
	}
}

// SinkOption configures a Sink. Every ReadOption is a SinkOption.
type SinkOption interface {
	applySink(*sinkConfig) error
}

// ReadOption configures a Sink or a Reader.
type ReadOption func(*readConfig) error

func (o ReadOption) applySink(c *sinkConfig) error { return o(&c.readConfig) }

// WithBlockDuration sets how long one read waits for new entries before
// it asks again. It must be positive. Defaults to DefaultBlockDuration
// (5s). It does not delay Close, which interrupts a waiting read.
func WithBlockDuration(d time.Duration) ReadOption {
	return func(c *readConfig) error {
		if d <= 0 {
			return fmt.Errorf("%w: WithBlockDuration(%v): must be positive", ErrInvalidOption, d)
		}
		c.block = d
		return nil
	}
}

// WithMaxPolled sets the most entries one read fetches (COUNT). It must be
// positive. Defaults to DefaultMaxPolled (1000).
func WithMaxPolled(n int) ReadOption {
	return func(c *readConfig) error {
		if n <= 0 {
			return fmt.Errorf("%w: WithMaxPolled(%d): must be positive", ErrInvalidOption, n)
		}
		c.maxPolled = int64(n)
		return nil
	}
}

// WithBufferSize sets the capacity of the channel Subscribe returns; 0
// makes it unbuffered. Reading stops while the channel is full. For a
// Sink, entries waiting in the buffer age towards the ack grace period.
// Defaults to DefaultBufferSize (100).
func WithBufferSize(n int) ReadOption {
	return func(c *readConfig) error {
		if n < 0 {
			return fmt.Errorf("%w: WithBufferSize(%d): must not be negative", ErrInvalidOption, n)
		}
		c.bufferSize = n
		return nil
	}
}

// StartAtOldest starts at the first entry of the stream. The default for
// a Sink. A Sink's start applies only when it creates its group; a group
// that exists keeps its position.
func StartAtOldest() ReadOption {
	return func(c *readConfig) error { c.start, c.startID = startOldest, ""; return nil }
}

// StartAtNewest starts with the first entry added after the sink or reader
// was created. The default for a Reader.
func StartAtNewest() ReadOption {
	return func(c *readConfig) error { c.start, c.startID = startNewest, ""; return nil }
}

// StartAfter starts with the first entry whose ID is greater than id, an
// ID as Add returns it ("1700000000000-0", or just milliseconds).
func StartAfter(id string) ReadOption {
	return func(c *readConfig) error {
		if _, _, ok := parseID(id); !ok {
			return fmt.Errorf("%w: StartAfter(%q): not a stream ID", ErrInvalidOption, id)
		}
		c.start, c.startID = startAfter, id
		return nil
	}
}

// StartAtTime starts with the first entry added at or after t (entry IDs
// carry Redis server time in milliseconds).
func StartAtTime(t time.Time) ReadOption {
	return func(c *readConfig) error {
		ms := t.UnixMilli()
		if ms <= 0 {
			c.start, c.startID = startOldest, ""
			return nil
		}
		// The greatest ID of the millisecond before t, so that entries of
		// t's own millisecond are included.
		c.start = startAfter
		c.startID = strconv.FormatInt(ms-1, 10) + "-" + strconv.FormatUint(math.MaxUint64, 10)
		return nil
	}
}

// WithLogger sets the logger for errors the background loops meet and
// recover from. Defaults to a logger that discards everything.
func WithLogger(l *slog.Logger) ReadOption {
	return func(c *readConfig) error {
		if l == nil {
			return fmt.Errorf("%w: WithLogger(nil)", ErrInvalidOption)
		}
		c.logger = l
		return nil
	}
}

// WithErrorHook sets a function called with every error the background
// loops meet and recover from (read errors, ErrGroupRecreated, reclaim
// errors). It runs on the loops' goroutines, possibly concurrently, so it
// must be safe for concurrent use and return quickly.
// Defaults to none.
func WithErrorHook(f func(error)) ReadOption {
	return func(c *readConfig) error {
		if f == nil {
			return fmt.Errorf("%w: WithErrorHook(nil)", ErrInvalidOption)
		}
		c.onError = f
		return nil
	}
}

// WithBackoff sets the wait before a read loop retries after a Redis
// error: min first, doubling up to max. Both must be positive and min <=
// max. Defaults to DefaultMinBackoff (100ms) and DefaultMaxBackoff (5s).
func WithBackoff(min, max time.Duration) ReadOption {
	return func(c *readConfig) error {
		if min <= 0 || max < min {
			return fmt.Errorf("%w: WithBackoff(%v, %v)", ErrInvalidOption, min, max)
		}
		c.minBackoff, c.maxBackoff = min, max
		return nil
	}
}

type sinkConfig struct {
	readConfig
	consumer    string
	grace       time.Duration
	deleteOnAck bool
	members     *members // WithMembers; nil: the sink keeps its consumer alive
}

type sinkOption func(*sinkConfig) error

func (o sinkOption) applySink(c *sinkConfig) error { return o(c) }

// WithConsumer names the sink's consumer in its group. A sink that
// restarts with the same name first receives the entries it had been
// delivered but not acknowledged. Names must be unique among the group's
// live sinks. Defaults to a random name.
func WithConsumer(name string) SinkOption {
	return sinkOption(func(c *sinkConfig) error {
		if name == "" {
			return fmt.Errorf("%w: WithConsumer(\"\")", ErrInvalidOption)
		}
		c.consumer = name
		return nil
	})
}

// WithAckGracePeriod sets how long a delivered entry may stay
// unacknowledged before a live consumer of the group reclaims it and it is
// delivered again. It is also how long a consumer's keep-alive may lapse
// before the consumer counts as dead. Sinks check every quarter of it. It
// must be positive. Defaults to DefaultAckGracePeriod (20s).
func WithAckGracePeriod(d time.Duration) SinkOption {
	return sinkOption(func(c *sinkConfig) error {
		if d <= 0 {
			return fmt.Errorf("%w: WithAckGracePeriod(%v): must be positive", ErrInvalidOption, d)
		}
		c.grace = d
		return nil
	})
}

// WithDeleteOnAck makes Ack and AckBatch also delete the acknowledged
// entries from the stream (XACK and XDEL in one transaction), so the
// stream holds only entries not yet processed. Use it when the group is
// the stream's only reader. Defaults to off.
func WithDeleteOnAck() SinkOption {
	return sinkOption(func(c *sinkConfig) error { c.deleteOnAck = true; return nil })
}
