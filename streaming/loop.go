package streaming

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/shepherd-go/shepherd/internal/group"
)

// unblockRetry is how often Close repeats CLIENT UNBLOCK while waiting for
// a read loop to leave: the loop may be between its check of done and its
// next blocking read when the first one is sent.
const unblockRetry = 5 * time.Millisecond

// lifecycle owns the background goroutines of a Sink or a Reader: it
// starts them, tells them to stop, interrupts their blocking reads and
// waits for them.
type lifecycle struct {
	group   *group.Group  // the loops
	done    chan struct{} // closed when stopping begins
	stopped chan struct{} // closed when every goroutine has returned
	stop    sync.Once
	reads   *blocker
}

func newLifecycle(reads *blocker) (*lifecycle, context.Context) {
	g := group.New(context.Background())
	return &lifecycle{
		group:   g,
		done:    make(chan struct{}),
		stopped: make(chan struct{}),
		reads:   reads,
	}, g.Context()
}

// goroutine runs f on a goroutine the lifecycle waits for.
func (l *lifecycle) goroutine(f func()) { l.group.Go(f) }

// started must be called once every goroutine has been started; after
// they have all returned it runs after (which closes the output channel)
// and marks the lifecycle stopped, which shutdown waits for.
func (l *lifecycle) started(after func()) {
	l.group.Close()
	go func() {
		l.group.Wait()
		after()
		close(l.stopped)
	}()
}

func (l *lifecycle) stopping() bool {
	select {
	case <-l.done:
		return true
	default:
		return false
	}
}

// shutdown signals stop, unblocks the read in flight and waits until all
// goroutines have returned or ctx ends.
func (l *lifecycle) shutdown(ctx context.Context) error {
	l.stop.Do(func() {
		close(l.done)
		l.group.Stop()
	})
	var unblockErr error
	for {
		if err := l.reads.unblock(ctx); err != nil {
			unblockErr = err
		}
		select {
		case <-l.stopped:
			return nil
		case <-ctx.Done():
			return errors.Join(fmt.Errorf("streaming: close: %w", ctx.Err()), unblockErr)
		case <-time.After(unblockRetry):
		}
	}
}

// reporter logs a recovered error and passes it to the error hook.
type reporter struct {
	logger  *slog.Logger
	onError func(error)
	attrs   []any
}

func (r reporter) report(msg string, err error) {
	r.logger.Warn(msg, append([]any{slog.Any("error", err)}, r.attrs...)...)
	r.onError(err)
}
