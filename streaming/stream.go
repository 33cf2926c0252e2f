package streaming

import (
	"context"
	"errors"
	"fmt"

	"github.com/redis/go-redis/v9"
	"github.com/shepherd-go/shepherd/internal/keys"
	"github.com/shepherd-go/shepherd/internal/redisutil"
)

// Stream appends entries to one Redis stream. A Stream holds no
// connection and no goroutine; it is cheap to create, needs no Close, and
// is safe for concurrent use.
type Stream struct {
	rdb    redis.UniversalClient
	ks     keyspace
	maxLen int64 // 0: no trimming
}

// StreamOption configures a Stream.
type StreamOption func(*Stream) error

// WithMaxLen trims the stream to about n entries on every add (XADD MAXLEN
// ~ n). Trimming drops the oldest entries whether or not any consumer has
// read or acknowledged them, so a burst can lose unread entries: bound
// your producers instead where entries must not be lost. n must be
// positive. Defaults to no trimming.
func WithMaxLen(n int64) StreamOption {
	return func(s *Stream) error {
		if n <= 0 {
			return fmt.Errorf("%w: WithMaxLen(%d): must be positive", ErrInvalidOption, n)
		}
		s.maxLen = n
		return nil
	}
}

// NewStream returns the stream name under hash tag tag: its Redis key is
// shepherd:{tag}:stream:name, so every stream and sink key of one tag
// shares a Redis Cluster slot. It does not touch Redis; the stream is
// created by the first Add. rdb must not be nil, tag must be non-empty and
// without "}", and name must be non-empty.
func NewStream(rdb redis.UniversalClient, tag, name string, opts ...StreamOption) (*Stream, error) {
	if redisutil.IsNil(rdb) {
		return nil, fmt.Errorf("%w: nil Redis client", ErrInvalidOption)
	}
	if name == "" {
		return nil, fmt.Errorf("%w: empty stream name", ErrInvalidOption)
	}
	space, err := keys.New(tag)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrInvalidOption, err)
	}
	s := &Stream{rdb: rdb, ks: keyspace{space: space, name: name}}
	for _, o := range opts {
		if err := o(s); err != nil {
			return nil, err
		}
	}
	return s, nil
}

// Name returns the stream's name as given to NewStream.
func (s *Stream) Name() string { return s.ks.name }

// Key returns the stream's Redis key, for logs and redis-cli.
func (s *Stream) Key() string { return s.ks.stream() }

// Entry is one entry for AddBatch.
type Entry struct {
	Event   string // event name; must not be empty
	Topic   string // optional topic; "" for none
	Payload []byte // optional payload
}

// AddOption configures one Add or AddBatch call.
type AddOption func(*addConfig)

type addConfig struct {
	topic        string
	onlyIfExists bool
}

// WithTopic sets the entry's topic. Defaults to none. AddBatch ignores it:
// each Entry carries its own topic.
func WithTopic(topic string) AddOption { return func(c *addConfig) { c.topic = topic } }

// OnlyIfExists adds only when the stream exists (XADD NOMKSTREAM);
// otherwise the call returns ErrStreamNotFound. It keeps a late add from
// re-creating a stream that was just destroyed. Defaults to off: an add
// creates the stream.
func OnlyIfExists() AddOption { return func(c *addConfig) { c.onlyIfExists = true } }

// Add appends an entry with the given event name and payload and returns
// its ID. One round trip (XADD).
func (s *Stream) Add(ctx context.Context, event string, payload []byte, opts ...AddOption) (string, error) {
	var cfg addConfig
	for _, o := range opts {
		o(&cfg)
	}
	if event == "" {
		return "", fmt.Errorf("%w: empty event name", ErrInvalidOption)
	}
	id, err := s.rdb.XAdd(ctx, s.xaddArgs(Entry{Event: event, Topic: cfg.topic, Payload: payload}, cfg)).Result()
	return id, s.addError(err)
}

// AddBatch appends entries in order, in one round trip (a MULTI/EXEC
// pipeline, so no other client's entry lands between them), and returns
// their IDs. Of opts, only OnlyIfExists applies. An empty batch is a no-op.
func (s *Stream) AddBatch(ctx context.Context, entries []Entry, opts ...AddOption) ([]string, error) {
	var cfg addConfig
	for _, o := range opts {
		o(&cfg)
	}
	for i, e := range entries {
		if e.Event == "" {
			return nil, fmt.Errorf("%w: entry %d: empty event name", ErrInvalidOption, i)
		}
	}
	if len(entries) == 0 {
		return nil, nil
	}
	cmds := make([]*redis.StringCmd, len(entries))
	_, err := s.rdb.TxPipelined(ctx, func(p redis.Pipeliner) error {
		for i, e := range entries {
			cmds[i] = p.XAdd(ctx, s.xaddArgs(e, cfg))
		}
		return nil
	})
	if err != nil && !errors.Is(err, redis.Nil) {
		return nil, s.addError(err)
	}
	ids := make([]string, len(entries))
	for i, c := range cmds {
		if ids[i], err = c.Result(); err != nil {
			return nil, s.addError(err)
		}
	}
	return ids, nil
}

func (s *Stream) xaddArgs(e Entry, cfg addConfig) *redis.XAddArgs {
	values := []any{fieldEvent, e.Event, fieldPayload, e.Payload}
	if e.Topic != "" {
		values = append(values, fieldTopic, e.Topic)
	}
	return &redis.XAddArgs{
		Stream:     s.ks.stream(),
		NoMkStream: cfg.onlyIfExists,
		MaxLen:     s.maxLen,
		Approx:     s.maxLen > 0,
		Values:     values,
	}
}

func (s *Stream) addError(err error) error {
	switch {
	case err == nil:
		return nil
	case errors.Is(err, redis.Nil):
		// XADD NOMKSTREAM answers nil when the stream is missing.
		return fmt.Errorf("%w: %s", ErrStreamNotFound, s.ks.name)
	default:
		return fmt.Errorf("streaming: add to %s: %w", s.ks.name, err)
	}
}

// Len returns the number of entries in the stream (XLEN), 0 when it does
// not exist. Acknowledged entries count until they are removed.
func (s *Stream) Len(ctx context.Context) (int64, error) {
	n, err := s.rdb.XLen(ctx, s.ks.stream()).Result()
	if err != nil {
		return 0, fmt.Errorf("streaming: len of %s: %w", s.ks.name, err)
	}
	return n, nil
}

// Pending returns how many entries group has delivered and not yet had
// acknowledged (XPENDING), 0 when the stream or group does not exist.
func (s *Stream) Pending(ctx context.Context, group string) (int64, error) {
	p, err := s.rdb.XPending(ctx, s.ks.stream(), group).Result()
	if isNoGroup(err) {
		return 0, nil
	}
	if err != nil {
		return 0, fmt.Errorf("streaming: pending of %s/%s: %w", s.ks.name, group, err)
	}
	return p.Count, nil
}

// Remove deletes the entries with the given IDs (XDEL) and returns how
// many existed. A removed entry that a group had delivered but not yet
// acknowledged is dropped from its pending list at the next reclaim.
func (s *Stream) Remove(ctx context.Context, ids ...string) (int64, error) {
	if len(ids) == 0 {
		return 0, nil
	}
	n, err := s.rdb.XDel(ctx, s.ks.stream(), ids...).Result()
	if err != nil {
		return 0, fmt.Errorf("streaming: remove from %s: %w", s.ks.name, err)
	}
	return n, nil
}

// Destroy deletes the stream, its consumer groups and the groups' lease
// and keep-alive keys. Close the stream's sinks first: a sink that is
// still running recreates its group (and so the stream) when it finds it
// gone. Two round trips.
func (s *Stream) Destroy(ctx context.Context) error {
	groups, err := s.rdb.XInfoGroups(ctx, s.ks.stream()).Result()
	if err != nil && !isNoSuchKey(err) {
		return fmt.Errorf("streaming: destroy %s: %w", s.ks.name, err)
	}
	del := []string{s.ks.stream()}
	for _, g := range groups {
		del = append(del, s.ks.lease(g.Name), s.ks.alive(g.Name))
	}
	if err := s.rdb.Del(ctx, del...).Err(); err != nil {
		return fmt.Errorf("streaming: destroy %s: %w", s.ks.name, err)
	}
	return nil
}

// isNoSuchKey reports whether err is the "no such key" error that XINFO
// gives for a missing stream.
func isNoSuchKey(err error) bool {
	return errors.Is(err, redis.Nil) || (redisutil.HasErrorCode(err, "ERR") && containsFold(err.Error(), "no such key"))
}
