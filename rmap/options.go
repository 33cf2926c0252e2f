package rmap

import (
	"fmt"
	"io"
	"log/slog"
	"time"
)

// Defaults of the options.
const (
	// DefaultMaxValueSize bounds keys and values: 1 MiB.
	DefaultMaxValueSize = 1 << 20
	// DefaultCheckInterval is how often a Map compares its revision with
	// Redis's when pub/sub is otherwise quiet.
	DefaultCheckInterval = 5 * time.Second
	// DefaultSubscriberBuffer is how many events a slow subscriber may
	// lag behind before its backlog is replaced by one EventResync.
	DefaultSubscriberBuffer = 1024
)

// Option configures a Map at Join.
type Option func(*config) error

type config struct {
	hashTag       string // "" means the map's name
	maxValueSize  int
	checkInterval time.Duration
	subBuffer     int
	logger        *slog.Logger
}

func defaultConfig() config {
	return config{
		maxValueSize:  DefaultMaxValueSize,
		checkInterval: DefaultCheckInterval,
		subBuffer:     DefaultSubscriberBuffer,
		logger:        slog.New(slog.NewTextHandler(io.Discard, nil)),
	}
}

// WithHashTag puts the map's Redis keys under the hash tag {tag}, so that
// all maps (and streams) of one pool share a Redis Cluster slot and pools
// never share keys. The tag must be non-empty and must not contain "}".
// Defaults to the map's name.
func WithHashTag(tag string) Option {
	return func(c *config) error {
		if tag == "" {
			return fmt.Errorf("%w: empty hash tag", ErrInvalidOption)
		}
		c.hashTag = tag
		return nil
	}
}

// WithMaxValueSize bounds the size in bytes of every key and value,
// including a list value after an append; larger ones are rejected with
// ErrTooLarge. n must be at least 1. Defaults to DefaultMaxValueSize
// (1 MiB).
func WithMaxValueSize(n int) Option {
	return func(c *config) error {
		if n < 1 {
			return fmt.Errorf("%w: max value size %d < 1", ErrInvalidOption, n)
		}
		c.maxValueSize = n
		return nil
	}
}

// WithCheckInterval sets how often the Map verifies, through its pub/sub
// connection, that it has seen every revision Redis holds. It bounds how
// long a silently lost message (or a silently broken connection) can keep
// the local copy stale. d must be positive. Defaults to
// DefaultCheckInterval (5s); each check costs two HMGETs and one PING.
func WithCheckInterval(d time.Duration) Option {
	return func(c *config) error {
		if d <= 0 {
			return fmt.Errorf("%w: check interval %v <= 0", ErrInvalidOption, d)
		}
		c.checkInterval = d
		return nil
	}
}

// WithSubscriberBuffer sets how many undelivered events one subscriber may
// accumulate before they are replaced by a single EventResync. n must be
// at least 1. Defaults to DefaultSubscriberBuffer (1024).
func WithSubscriberBuffer(n int) Option {
	return func(c *config) error {
		if n < 1 {
			return fmt.Errorf("%w: subscriber buffer %d < 1", ErrInvalidOption, n)
		}
		c.subBuffer = n
		return nil
	}
}

// WithLogger sets the logger for reloads and connection trouble. Defaults
// to a logger that discards everything.
func WithLogger(l *slog.Logger) Option {
	return func(c *config) error {
		if l == nil {
			return fmt.Errorf("%w: nil logger", ErrInvalidOption)
		}
		c.logger = l
		return nil
	}
}
