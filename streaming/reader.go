package streaming

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
)

// Reader reads a stream without a consumer group (XREAD): every Reader
// sees every entry after its start position, and nothing is acknowledged.
// It is a MultiReader that follows one stream: one goroutine, which Close
// stops. A Reader is safe for concurrent use.
type Reader struct {
	stream *Stream
	mr     *MultiReader
}

// NewReader starts reading stream. The start position (default
// StartAtNewest) is fixed here, with one round trip for StartAtNewest, so
// entries added between NewReader and Subscribe are delivered too. Close
// the reader when done.
func NewReader(ctx context.Context, stream *Stream, opts ...ReadOption) (*Reader, error) {
	if stream == nil {
		return nil, fmt.Errorf("%w: nil stream", ErrInvalidOption)
	}
	cfg, err := readOptions(append([]ReadOption{StartAtNewest()}, opts...))
	if err != nil {
		return nil, err
	}
	last := "0-0"
	switch cfg.start {
	case startAfter:
		last = cfg.startID
	case startNewest:
		if last, err = newestID(ctx, stream); err != nil {
			return nil, fmt.Errorf("streaming: new reader on %s: %w", stream.Name(), err)
		}
	}
	mr := startMultiReader(stream.rdb, cfg, slog.String("stream", stream.Name()))
	if err := mr.addAt(ctx, stream, last); err != nil {
		return nil, errors.Join(err, mr.Close(context.WithoutCancel(ctx)))
	}
	return &Reader{stream: stream, mr: mr}, nil
}

// Subscribe returns the channel of entries. Every call returns the same
// channel; it is closed when the reader has stopped after Close.
func (r *Reader) Subscribe() <-chan *Event { return r.mr.Subscribe() }

// Stream returns the stream the reader reads.
func (r *Reader) Stream() *Stream { return r.stream }

// Close stops the reader: it interrupts a blocked read at once, waits for
// the reader's goroutine and closes the Subscribe channel. If ctx ends
// first, Close returns its error and may be called again. Close is
// idempotent: once it has succeeded, later calls return the first result.
func (r *Reader) Close(ctx context.Context) error { return r.mr.Close(ctx) }
