package limit

import (
	"container/list"
	"context"
	"errors"
	"fmt"
	"sync"
	"time"
)

// DefaultBlockingTimeout is how long Blocking.Acquire waits by default.
const DefaultBlockingTimeout = time.Second

// Blocking wraps a Limiter so that Acquire waits, first come first served,
// for a slot instead of failing at once. A waiter gives up with
// ErrLimitExceeded after the timeout, or with ctx's error when ctx ends
// first.
//
// Waiters are woken when a Token of this Blocking is released, so the
// wrapped limiter must be used only through it (a slot freed behind its
// back wakes nobody until the next release). Because the queue is FIFO, a
// waiter that the wrapped limiter cannot admit (a Partitioned whose
// partition is at its reserved bound) holds up those behind it until a
// release lets it in or it times out. Safe for concurrent use; a waiting
// Acquire costs one goroutine park, a timer and a small allocation.
type Blocking struct {
	inner   Limiter
	timeout time.Duration

	mu      sync.Mutex
	waiters list.List // of *waiter, oldest first
}

type waiter struct {
	ctx    context.Context
	ch     chan Token // receives the inner token; buffered so handing never blocks
	elem   *list.Element
	handed bool // guarded by Blocking.mu
}

// BlockingOption configures a Blocking.
type BlockingOption func(*Blocking)

// WithBlockingTimeout sets the longest wait of Acquire; 0 waits until ctx
// ends. Defaults to DefaultBlockingTimeout.
func WithBlockingTimeout(d time.Duration) BlockingOption { return func(b *Blocking) { b.timeout = d } }

// NewBlocking wraps inner, which it then owns. It returns an error wrapping
// ErrInvalidOption for a nil inner or a negative timeout.
func NewBlocking(inner Limiter, opts ...BlockingOption) (*Blocking, error) {
	b := &Blocking{inner: inner, timeout: DefaultBlockingTimeout}
	for _, o := range opts {
		o(b)
	}
	if inner == nil {
		return nil, invalidf("Blocking inner limiter is nil")
	}
	if b.timeout < 0 {
		return nil, invalidf("Blocking timeout must be >= 0, got %v", b.timeout)
	}
	return b, nil
}

// TryAcquire admits a request only if nobody is waiting and the wrapped
// limiter admits it; it never waits.
func (b *Blocking) TryAcquire(ctx context.Context) (Token, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.waiters.Len() > 0 {
		if err := ctx.Err(); err != nil {
			return Token{}, err
		}
		return Token{}, ErrLimitExceeded
	}
	t, err := b.inner.TryAcquire(ctx)
	if err != nil {
		return Token{}, err
	}
	return b.wrap(t), nil
}

// Acquire admits a request, waiting in line for a slot up to the timeout
// or until ctx ends.
func (b *Blocking) Acquire(ctx context.Context) (Token, error) {
	b.mu.Lock()
	if b.waiters.Len() == 0 {
		t, err := b.inner.TryAcquire(ctx)
		if err == nil {
			b.mu.Unlock()
			return b.wrap(t), nil
		}
		if !errors.Is(err, ErrLimitExceeded) {
			b.mu.Unlock()
			return Token{}, err
		}
	} else if err := ctx.Err(); err != nil {
		b.mu.Unlock()
		return Token{}, err
	}
	w := &waiter{ctx: ctx, ch: make(chan Token, 1)}
	w.elem = b.waiters.PushBack(w)
	b.mu.Unlock()

	var expired <-chan time.Time
	if b.timeout > 0 {
		timer := time.NewTimer(b.timeout)
		defer timer.Stop()
		expired = timer.C
	}
	var err error
	select {
	case t := <-w.ch:
		return b.wrap(t), nil
	case <-ctx.Done():
		err = ctx.Err()
	case <-expired:
		err = fmt.Errorf("%w: no slot within %v", ErrLimitExceeded, b.timeout)
	}

	b.mu.Lock()
	if !w.handed {
		if w.elem != nil {
			b.waiters.Remove(w.elem)
			w.elem = nil
		}
		b.mu.Unlock()
		// Leaving the head of the line may let the next waiter in.
		b.dispatch()
		return Token{}, err
	}
	b.mu.Unlock()
	// A slot was handed over just as we gave up: pass it on.
	(<-w.ch).Ignore()
	b.dispatch()
	return Token{}, err
}

// wrap gives the caller a Token whose release wakes the next waiter.
func (b *Blocking) wrap(t Token) Token {
	return newToken(b, held{inner: t})
}

func (b *Blocking) release(h held, o outcome) {
	h.inner.finish(o, h)
	b.dispatch()
}

// dispatch hands free slots to waiters in order until the head cannot be
// admitted.
func (b *Blocking) dispatch() {
	b.mu.Lock()
	defer b.mu.Unlock()
	for e := b.waiters.Front(); e != nil; e = b.waiters.Front() {
		w := e.Value.(*waiter)
		t, err := b.inner.TryAcquire(w.ctx)
		if errors.Is(err, ErrLimitExceeded) {
			return
		}
		b.waiters.Remove(e)
		w.elem = nil
		if err != nil {
			// The waiter's ctx ended; it will find itself unhanded.
			continue
		}
		w.handed = true
		w.ch <- t
	}
}

// Limit returns the wrapped limiter's limit.
func (b *Blocking) Limit() int { return b.inner.Limit() }

// InFlight returns the wrapped limiter's in-flight count.
func (b *Blocking) InFlight() int { return b.inner.InFlight() }

// Waiting returns the number of Acquire calls waiting in line.
func (b *Blocking) Waiting() int {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.waiters.Len()
}
