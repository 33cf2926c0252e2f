package limit

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestExecutorFollowsLimitAndBlocksSubmitter(t *testing.T) {
	t.Parallel()
	e, err := NewAdaptiveExecutor(newSimple(t, 2))
	require.NoError(t, err)
	defer e.Close()

	release := make(chan struct{})
	var running, peak atomic.Int64
	task := func(context.Context) error {
		n := running.Add(1)
		for m := peak.Load(); n > m && !peak.CompareAndSwap(m, n); m = peak.Load() {
		}
		<-release
		running.Add(-1)
		return nil
	}
	require.NoError(t, e.Submit(t.Context(), task))
	require.NoError(t, e.Submit(t.Context(), task))
	require.Eventually(t, func() bool { return running.Load() == 2 }, 5*time.Second, time.Millisecond)

	// The third Submit blocks until a task finishes.
	submitted := make(chan error, 1)
	go func() { submitted <- e.Submit(t.Context(), task) }()
	require.Eventually(t, func() bool { return e.Limiter().(*Blocking).Waiting() == 1 },
		5*time.Second, time.Millisecond)
	select {
	case err := <-submitted:
		t.Fatalf("Submit returned %v while the executor was full", err)
	default:
	}
	close(release)
	select {
	case err := <-submitted:
		require.NoError(t, err)
	case <-time.After(5 * time.Second):
		t.Fatal("Submit still blocked after tasks finished")
	}
	require.NoError(t, e.Shutdown(t.Context()))
	assert.Equal(t, int64(2), peak.Load())
	assert.Zero(t, e.Limiter().InFlight())
}

func TestExecutorOutcomesAndErrors(t *testing.T) {
	t.Parallel()
	rec := &recorder{}
	s, err := NewSimple(rec)
	require.NoError(t, err)
	var mu sync.Mutex
	var handled []error
	e, err := NewAdaptiveExecutor(s, WithErrorHandler(func(err error) {
		mu.Lock()
		handled = append(handled, err)
		mu.Unlock()
	}))
	require.NoError(t, err)
	boom := errors.New("boom")
	tasks := []func(context.Context) error{
		func(context.Context) error { return nil },
		func(context.Context) error { return ErrDropped },
		func(context.Context) error { return boom },
		func(context.Context) error { panic("kaboom") },
	}
	for _, task := range tasks {
		require.NoError(t, e.Submit(t.Context(), task))
	}
	require.NoError(t, e.Shutdown(t.Context()))
	require.ErrorIs(t, e.Submit(t.Context(), tasks[0]), ErrClosed)

	mu.Lock()
	defer mu.Unlock()
	require.Len(t, handled, 3)
	var sawPanic, sawBoom bool
	for _, err := range handled {
		sawPanic = sawPanic || errors.Is(err, ErrTaskPanicked)
		sawBoom = sawBoom || errors.Is(err, boom)
	}
	assert.True(t, sawPanic && sawBoom)
	// Success and drop are fed to the algorithm, the others ignored.
	rec2 := rec.samples
	require.Len(t, rec2, 2)
	assert.ElementsMatch(t, []bool{false, true}, []bool{rec2[0].Dropped, rec2[1].Dropped})
}

func TestExecutorCloseCancelsTasksAndReturnsFirstError(t *testing.T) {
	t.Parallel()
	e, err := NewAdaptiveExecutor(newSimple(t, 4))
	require.NoError(t, err)
	started := make(chan struct{}, 2)
	for range 2 {
		require.NoError(t, e.Submit(t.Context(), func(ctx context.Context) error {
			started <- struct{}{}
			<-ctx.Done()
			return ctx.Err()
		}))
	}
	<-started
	<-started
	err = e.Close()
	require.ErrorIs(t, err, context.Canceled)
	assert.Contains(t, err.Error(), "1 more")
	require.ErrorIs(t, e.Close(), context.Canceled, "Close is idempotent")
	require.ErrorIs(t, e.Submit(t.Context(), func(context.Context) error { return nil }), ErrClosed)
}

func TestExecutorShutdownDeadlineAndWaitingSubmitter(t *testing.T) {
	t.Parallel()
	e, err := NewAdaptiveExecutor(newSimple(t, 1))
	require.NoError(t, err)
	require.NoError(t, e.Submit(t.Context(), func(ctx context.Context) error {
		<-ctx.Done()
		return nil
	}))
	// A submitter waiting for a slot is released with ErrClosed.
	submitted := make(chan error, 1)
	go func() { submitted <- e.Submit(t.Context(), func(context.Context) error { return nil }) }()
	require.Eventually(t, func() bool { return e.Limiter().(*Blocking).Waiting() == 1 },
		5*time.Second, time.Millisecond)

	ctx, cancel := context.WithTimeout(t.Context(), 20*time.Millisecond)
	defer cancel()
	err = e.Shutdown(ctx)
	require.ErrorIs(t, err, context.DeadlineExceeded)
	select {
	case err := <-submitted:
		require.ErrorIs(t, err, ErrClosed)
	case <-time.After(5 * time.Second):
		t.Fatal("waiting Submit not released by Shutdown")
	}
	require.NoError(t, e.Close())
}

func TestExecutorSubmitContext(t *testing.T) {
	t.Parallel()
	_, err := NewAdaptiveExecutor(nil)
	require.ErrorIs(t, err, ErrInvalidOption)
	b := newBlocking(t, 1, WithBlockingTimeout(10*time.Millisecond))
	e, err := NewAdaptiveExecutor(b)
	require.NoError(t, err)
	defer e.Close()
	assert.Same(t, b, e.Limiter(), "a Blocking is used as given")
	block := make(chan struct{})
	require.NoError(t, e.Submit(t.Context(), func(context.Context) error { <-block; return nil }))
	require.ErrorIs(t, e.Submit(t.Context(), func(context.Context) error { return nil }), ErrLimitExceeded)
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	require.ErrorIs(t, e.Submit(ctx, func(context.Context) error { return nil }), context.Canceled)
	close(block)
}

// settable is an Algorithm whose limit the test sets; the limiter picks it
// up at the next release.
type settable struct{ limit atomic.Int64 }

func (s *settable) Update(Sample) int { return int(s.limit.Load()) }
func (s *settable) Limit() int        { return int(s.limit.Load()) }

func TestExecutorConcurrencyFollowsLimit(t *testing.T) {
	t.Parallel()
	alg := &settable{}
	alg.limit.Store(4)
	s, err := NewSimple(alg)
	require.NoError(t, err)
	e, err := NewAdaptiveExecutor(s)
	require.NoError(t, err)

	var running, peak atomic.Int64
	gates := make(chan chan struct{}, 64)
	task := func(context.Context) error {
		n := running.Add(1)
		for m := peak.Load(); n > m && !peak.CompareAndSwap(m, n); m = peak.Load() {
		}
		g := make(chan struct{})
		gates <- g
		<-g
		running.Add(-1)
		return nil
	}
	for range 4 {
		require.NoError(t, e.Submit(t.Context(), task))
	}
	require.Eventually(t, func() bool { return running.Load() == 4 }, 5*time.Second, time.Millisecond)
	assert.Equal(t, int64(4), peak.Load())

	// The limit drops to 1: as the four finish, only one runs at a time.
	alg.limit.Store(1)
	peak.Store(0)
	submitted := make(chan error, 1)
	go func() {
		for range 3 {
			if err := e.Submit(t.Context(), task); err != nil {
				submitted <- err
				return
			}
		}
		submitted <- nil
	}()
	for range 7 {
		select {
		case g := <-gates:
			close(g)
		case <-time.After(5 * time.Second):
			t.Fatal("no task ran")
		}
	}
	require.NoError(t, <-submitted)
	require.NoError(t, e.Shutdown(t.Context()))
	assert.LessOrEqual(t, peak.Load(), int64(1), "concurrency did not follow the lower limit")
}
