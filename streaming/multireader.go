package streaming

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/shepherd-go/shepherd/internal/backoff"
	"github.com/shepherd-go/shepherd/internal/redisutil"
)

// MultiReader reads a changing set of streams without a consumer group,
// all with one blocking XREAD on one connection. A process that follows
// many streams (a node with many workers, each with its own stream) thus
// holds one connection for all of them, not one per stream. The streams
// must share one client and, on Redis Cluster, one hash tag.
//
// It runs one goroutine, which Close stops. A MultiReader is safe for
// concurrent use.
type MultiReader struct {
	rdb  redis.UniversalClient
	cfg  readConfig
	out  chan *Event
	life *lifecycle
	ctx  context.Context
	rep  reporter

	mu      sync.Mutex
	streams map[string]*followed // by Redis key
	gen     uint64               // bumped by Add and Remove
	seen    uint64               // the gen the read loop works with
	seenCh  chan struct{}        // closed and replaced when seen changes
	wake    chan struct{}        // capacity 1: the set changed

	closeMu sync.Mutex
	closed  bool
	err     error
}

type followed struct {
	stream *Stream
	last   string
}

// NewMultiReader returns a reader that follows no stream yet; Add streams
// to it. The read options apply to every stream (the start options are
// ignored: Add starts at the stream's newest entry).
func NewMultiReader(rdb redis.UniversalClient, opts ...ReadOption) (*MultiReader, error) {
	if redisutil.IsNil(rdb) {
		return nil, fmt.Errorf("%w: nil Redis client", ErrInvalidOption)
	}
	cfg, err := readOptions(opts)
	if err != nil {
		return nil, err
	}
	return startMultiReader(rdb, cfg, slog.String("reader", "multi")), nil
}

// readOptions applies opts to the default read configuration.
func readOptions(opts []ReadOption) (readConfig, error) {
	cfg := defaultReadConfig()
	for _, o := range opts {
		if o == nil {
			return cfg, fmt.Errorf("%w: nil ReadOption", ErrInvalidOption)
		}
		if err := o(&cfg); err != nil {
			return cfg, err
		}
	}
	return cfg, nil
}

func startMultiReader(rdb redis.UniversalClient, cfg readConfig, attrs ...any) *MultiReader {
	r := &MultiReader{
		rdb: rdb, cfg: cfg,
		out:     make(chan *Event, cfg.bufferSize),
		streams: make(map[string]*followed),
		seenCh:  make(chan struct{}),
		wake:    make(chan struct{}, 1),
		rep:     reporter{logger: cfg.logger, onError: cfg.onError, attrs: attrs},
	}
	r.life, r.ctx = newLifecycle(newBlocker(rdb, r.rep))
	r.life.goroutine(r.readLoop)
	r.life.started(func() { close(r.out) })
	return r
}

// Subscribe returns the channel of entries of every followed stream; an
// Event's Stream field names its stream. It is closed after Close.
func (r *MultiReader) Subscribe() <-chan *Event { return r.out }

// Add follows s from its newest entry on: every entry added after Add was
// called is delivered. Adding a stream twice is a no-op. Add returns once
// the read loop has taken s into its next read (interrupting a blocked
// read), or with ctx's error.
func (r *MultiReader) Add(ctx context.Context, s *Stream) error {
	if s == nil {
		return fmt.Errorf("%w: nil stream", ErrInvalidOption)
	}
	last, err := newestID(ctx, s)
	if err != nil {
		return err
	}
	return r.addAt(ctx, s, last)
}

// AddFromStart follows s from its oldest entry: unlike Add, it also
// delivers the entries s holds already. Following s already, it does
// nothing.
func (r *MultiReader) AddFromStart(ctx context.Context, s *Stream) error {
	if s == nil {
		return fmt.Errorf("%w: nil stream", ErrInvalidOption)
	}
	return r.addAt(ctx, s, "0-0")
}

// newestID returns the ID of s's newest entry, or "0-0" when it has none:
// "$" would mean "after the newest entry when the read starts", losing
// entries added before the first read.
func newestID(ctx context.Context, s *Stream) (string, error) {
	msgs, err := s.rdb.XRevRangeN(ctx, s.Key(), "+", "-", 1).Result()
	if err != nil {
		return "", fmt.Errorf("streaming: newest entry of %s: %w", s.Name(), err)
	}
	if len(msgs) > 0 {
		return msgs[0].ID, nil
	}
	return "0-0", nil
}

// addAt follows s from the entry after last.
func (r *MultiReader) addAt(ctx context.Context, s *Stream, last string) error {
	r.mu.Lock()
	if _, ok := r.streams[s.Key()]; ok {
		r.mu.Unlock()
		return nil
	}
	r.streams[s.Key()] = &followed{stream: s, last: last}
	r.mu.Unlock()
	return r.changed(ctx)
}

// Remove stops following s; entries of s read before Remove may still be
// delivered. It does not wait for the read loop (which drops what it reads
// of a removed stream), so it returns at once even when Redis is
// unreachable. ctx is accepted for symmetry with Add.
func (r *MultiReader) Remove(ctx context.Context, s *Stream) error {
	if s == nil {
		return fmt.Errorf("%w: nil stream", ErrInvalidOption)
	}
	r.mu.Lock()
	delete(r.streams, s.Key())
	r.mu.Unlock()
	return nil
}

// changed bumps the generation and interrupts the blocked read until the
// loop has picked the new set up, so a new stream is never left unread for
// a whole block duration.
func (r *MultiReader) changed(ctx context.Context) error {
	r.mu.Lock()
	r.gen++
	want := r.gen
	r.mu.Unlock()
	for {
		r.mu.Lock()
		seen, ch := r.seen, r.seenCh
		r.mu.Unlock()
		if seen >= want {
			return nil
		}
		select {
		case r.wake <- struct{}{}:
		default:
		}
		if err := r.life.reads.unblock(ctx); err != nil {
			return fmt.Errorf("streaming: interrupt read: %w", err)
		}
		select {
		case <-ch:
		case <-r.life.done:
			return errors.New("streaming: multi reader closed")
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(unblockRetry):
		}
	}
}

// Close stops the reader: it interrupts a blocked read at once, waits for
// the reader's goroutine and closes the Subscribe channel. If ctx ends
// first, Close returns its error and may be called again. Close is
// idempotent: once it has succeeded, later calls return the first result.
func (r *MultiReader) Close(ctx context.Context) error {
	r.closeMu.Lock()
	defer r.closeMu.Unlock()
	if r.closed {
		return r.err
	}
	if err := r.life.shutdown(ctx); err != nil {
		return err
	}
	r.closed = true
	r.err = r.life.reads.close()
	return r.err
}

// snapshot returns the XREAD arguments for the current set and marks its
// generation seen.
func (r *MultiReader) snapshot() (keys, ids []string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	for k, f := range r.streams {
		keys = append(keys, k)
		ids = append(ids, f.last)
	}
	if r.seen != r.gen {
		r.seen = r.gen
		close(r.seenCh)
		r.seenCh = make(chan struct{})
	}
	return keys, ids
}

func (r *MultiReader) readLoop() {
	bo := backoff.Backoff{Min: r.cfg.minBackoff, Max: r.cfg.maxBackoff}
	for !r.life.stopping() {
		err := r.readOnce()
		if err == nil {
			bo.Reset()
			continue
		}
		if r.life.stopping() {
			return
		}
		r.rep.report("streaming: reader read failed; retrying", fmt.Errorf("streaming: read: %w", err))
		backoff.Sleep(bo.Next(), r.life.done)
	}
}

func (r *MultiReader) readOnce() error {
	// Take the set first: Add waits for it to be taken, and must not wait
	// while the connection cannot be had (Redis down, client closed).
	keys, ids := r.snapshot()
	cmd, block, err := r.life.reads.cmd(r.ctx, r.cfg.block)
	if err != nil {
		return err
	}
	if r.life.stopping() {
		return nil
	}
	if len(keys) == 0 {
		// Nothing to read: wait for Add.
		select {
		case <-r.wake:
		case <-r.life.done:
		}
		return nil
	}
	res, err := cmd.XRead(r.ctx, &redis.XReadArgs{
		Streams: append(keys, ids...),
		Count:   r.cfg.maxPolled,
		Block:   block,
	}).Result()
	if errors.Is(err, redis.Nil) {
		return nil
	}
	if err != nil {
		if fine(err) {
			return err
		}
		return errors.Join(err, r.life.reads.reset())
	}
	for _, s := range res {
		r.mu.Lock()
		f := r.streams[s.Stream]
		r.mu.Unlock()
		if f == nil {
			continue // removed meanwhile
		}
		for _, m := range s.Messages {
			select {
			case r.out <- eventFromMessage(f.stream.Name(), m):
				r.mu.Lock()
				f.last = m.ID
				r.mu.Unlock()
			case <-r.life.done:
				return nil
			}
		}
	}
	return nil
}
