package streaming

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"
)

// Sink reads a stream through a consumer group and delivers every entry
// at least once. Deliveries go to the channel Subscribe returns; each must
// be acknowledged with Ack or AckBatch within the ack grace period, or a
// live consumer of the group (possibly this one) reclaims it and delivers
// it again with Event.Reclaimed set.
//
// A Sink runs two goroutines: one reads new entries, one keeps the
// consumer alive and, while it holds the group's reclaim lease, reclaims
// overdue entries and deletes dead consumers that own nothing. Close stops
// both. A Sink is safe for concurrent use.
type Sink struct {
	stream   *Stream
	group    string
	cfg      sinkConfig
	token    string // this sink's reclaim lease token
	out      chan *Event
	life     *lifecycle
	ctx      context.Context // cancelled by Close
	rep      reporter
	closeMu  sync.Mutex
	closeErr error
	closed   bool

	// outMu lets callers outside the sink's goroutines (TakeOver) deliver
	// without racing the close of out: they hold it for reading, the
	// closer for writing.
	outMu     sync.RWMutex
	outClosed bool

	// ownDone is closed once readLoop has read this consumer's own
	// pending entries: TakeOver waits for it, or an entry it claims for
	// this consumer would be delivered by both (see TakeOver).
	ownDone chan struct{}
	ownOnce sync.Once

	lastReclaim time.Time // owned by maintainLoop: with members, reclaims are rarer than ticks
}

// NewSink creates the consumer group (and the stream) if they do not
// exist, registers this sink's consumer and starts reading. The start
// option (default StartAtOldest) applies only when the group is created
// here. group must be non-empty. Close the sink when done.
func NewSink(ctx context.Context, stream *Stream, group string, opts ...SinkOption) (*Sink, error) {
	if stream == nil {
		return nil, fmt.Errorf("%w: nil stream", ErrInvalidOption)
	}
	if group == "" {
		return nil, fmt.Errorf("%w: empty group name", ErrInvalidOption)
	}
	cfg := sinkConfig{readConfig: defaultReadConfig(), grace: DefaultAckGracePeriod}
	for _, o := range opts {
		if o == nil {
			return nil, fmt.Errorf("%w: nil SinkOption", ErrInvalidOption)
		}
		if err := o.applySink(&cfg); err != nil {
			return nil, err
		}
	}
	if cfg.consumer == "" {
		cfg.consumer = "c-" + randomHex(8)
	}
	start := "0"
	switch cfg.start {
	case startNewest:
		start = "$"
	case startAfter:
		start = cfg.startID
	}
	if _, err := createGroup(ctx, stream, group, start); err != nil {
		return nil, err
	}
	s := &Sink{
		stream:  stream,
		group:   group,
		cfg:     cfg,
		token:   randomHex(16),
		out:     make(chan *Event, cfg.bufferSize),
		ownDone: make(chan struct{}),
		rep: reporter{logger: cfg.logger, onError: cfg.onError, attrs: []any{
			slog.String("stream", stream.Name()), slog.String("group", group), slog.String("consumer", cfg.consumer),
		}},
	}
	// A keep-alive before the first read, so that no sweeper takes the
	// new consumer for a dead one.
	if _, err := s.keepAlive(ctx); err != nil {
		return nil, err
	}
	s.life, s.ctx = newLifecycle(newBlocker(stream.rdb, s.rep))
	s.life.goroutine(s.readLoop)
	s.life.goroutine(s.maintainLoop)
	s.life.started(func() {
		s.outMu.Lock()
		defer s.outMu.Unlock()
		s.outClosed = true
		close(s.out)
	})
	return s, nil
}

// createGroup creates group on stream at start, creating the stream too,
// and reports whether it did (false: it existed).
func createGroup(ctx context.Context, stream *Stream, group, start string) (bool, error) {
	err := stream.rdb.XGroupCreateMkStream(ctx, stream.ks.stream(), group, start).Err()
	switch {
	case err == nil:
		return true, nil
	case isBusyGroup(err):
		return false, nil
	default:
		return false, fmt.Errorf("streaming: create group %s on %s: %w", group, stream.Name(), err)
	}
}

// Subscribe returns the channel of deliveries. Every call returns the same
// channel; it is closed when the sink has stopped after Close.
func (s *Sink) Subscribe() <-chan *Event { return s.out }

// Consumer returns the sink's consumer name in its group.
func (s *Sink) Consumer() string { return s.cfg.consumer }

// Stream returns the stream the sink reads.
func (s *Sink) Stream() *Stream { return s.stream }

// Group returns the sink's consumer group.
func (s *Sink) Group() string { return s.group }

// Ack acknowledges ev (XACK; with WithDeleteOnAck also XDEL, in one
// transaction). Acknowledging an entry twice, or one that was reclaimed by
// another consumer, is harmless. Ack works after Close, so that work
// finished during shutdown can still be acknowledged.
func (s *Sink) Ack(ctx context.Context, ev *Event) error {
	return s.AckBatch(ctx, []*Event{ev})
}

// AckBatch acknowledges events with one XACK in one round trip (with
// WithDeleteOnAck, XACK and XDEL in one MULTI/EXEC). On an error, some may
// have been acknowledged; acknowledging them again is harmless.
func (s *Sink) AckBatch(ctx context.Context, events []*Event) error {
	if len(events) == 0 {
		return nil
	}
	ids := make([]string, len(events))
	for i, ev := range events {
		if ev == nil || ev.Stream != s.stream.Name() {
			return fmt.Errorf("%w: event %d", ErrInvalidEvent, i)
		}
		ids[i] = ev.ID
	}
	key := s.stream.ks.stream()
	var err error
	if s.cfg.deleteOnAck {
		_, err = s.stream.rdb.TxPipelined(ctx, func(p redis.Pipeliner) error {
			p.XAck(ctx, key, s.group, ids...)
			p.XDel(ctx, key, ids...)
			return nil
		})
	} else {
		err = s.stream.rdb.XAck(ctx, key, s.group, ids...).Err()
	}
	if err != nil {
		return fmt.Errorf("streaming: ack on %s/%s: %w", s.stream.Name(), s.group, err)
	}
	return nil
}

// Close stops the sink: it interrupts a blocked read at once, waits for
// the sink's goroutines, closes the Subscribe channel, releases the
// reclaim lease and, if the consumer owns no pending entries, deletes it
// from the group. Entries delivered but not acknowledged stay pending and
// are reclaimed by another consumer after the grace period. If ctx ends
// first, Close returns its error and may be called again. Close is
// idempotent: once it has succeeded, later calls return the first result.
// When Redis does not answer at all (frozen, not down), sending CLIENT
// UNBLOCK can take up to the client's read timeout: go-redis applies ctx
// to socket reads only with ContextTimeoutEnabled.
func (s *Sink) Close(ctx context.Context) error {
	s.closeMu.Lock()
	defer s.closeMu.Unlock()
	if s.closed {
		return s.closeErr
	}
	if err := s.life.shutdown(ctx); err != nil {
		return err
	}
	s.closed = true
	s.closeErr = errors.Join(s.life.reads.close(), s.retire(ctx))
	return s.closeErr
}

// deliver hands ev to the subscriber, or gives up when the sink stops.
// An entry not delivered stays pending and is reclaimed later.
func (s *Sink) deliver(ev *Event) bool {
	select {
	case s.out <- ev:
		return true
	case <-s.life.done:
		return false
	}
}

// deliverFromCaller is deliver for a goroutine the sink does not own.
func (s *Sink) deliverFromCaller(ev *Event) bool {
	s.outMu.RLock()
	defer s.outMu.RUnlock()
	if s.outClosed {
		return false
	}
	return s.deliver(ev)
}

// recreateGroup handles NOGROUP: the stream or the group vanished, for
// instance because Redis restarted without persistence. The group is
// created again at "0", so that every entry in the (possibly new) stream
// is delivered: at least once beats lost.
func (s *Sink) recreateGroup() error {
	created, err := createGroup(s.ctx, s.stream, s.group, "0")
	if err != nil {
		return err
	}
	if created {
		s.rep.report("streaming: consumer group was missing; recreated it",
			fmt.Errorf("%w: %s/%s", ErrGroupRecreated, s.stream.Name(), s.group))
	}
	// The keep-alive hash may be gone too.
	_, err = s.keepAlive(s.ctx)
	return err
}

func randomHex(n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b) // crypto/rand.Read never fails (Go 1.24+ panics instead).
	return hex.EncodeToString(b)
}
