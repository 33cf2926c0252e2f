package queue

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/shepherd-go/shepherd/internal/redistest"
)

func done(t *testing.T, s *Server, d time.Duration) {
	t.Helper()
	select {
	case <-s.Done():
	case <-time.After(d):
		t.Fatalf("the server did not stop within %v", d)
	}
}

func TestDrainRunsWhatIsThereThenStops(t *testing.T) {
	t.Parallel()
	name := redistest.Name(t)
	q := open(t, name)
	ctx := testCtx(t, 20*time.Second)
	var fs []*Future
	for range 30 {
		f, err := q.Submit(ctx, []byte("x"))
		require.NoError(t, err)
		fs = append(fs, f)
	}
	later, err := q.Submit(ctx, []byte("later"), WithDelay(time.Hour))
	require.NoError(t, err)
	var ran atomic.Int64
	s := serve(t, q, func(ctx context.Context, t *Task) ([]byte, error) {
		ran.Add(1)
		return echo(ctx, t)
	}, WithWorkers(3), WithMode(ModeDrain))
	assert.Equal(t, ModeDrain, s.Mode())
	done(t, s, 10*time.Second)
	assert.Equal(t, int64(30), ran.Load(), "the server stopped before it ran every task")
	st, err := q.Stats(ctx)
	require.NoError(t, err)
	assert.Zero(t, st.Available+st.InFlight, "tasks left: %+v", st)
	for _, f := range fs {
		_, err := wait(t, f, 5*time.Second)
		require.NoError(t, err)
	}
	info, err := q.Inspect(ctx, later.ID())
	require.NoError(t, err)
	assert.Equal(t, StateDelayed, info.State, "a task not due is left")
	assert.ErrorIs(t, s.SetMode(ModeServe), ErrStopped)
	require.NoError(t, s.Stop(ctx), "Stop after draining")
	// The queue can serve again.
	s2 := serve(t, q, echo, WithWorkers(1))
	require.NoError(t, s2.Stop(ctx))
}

func TestSetModeBothWays(t *testing.T) {
	t.Parallel()
	q := open(t, redistest.Name(t))
	ctx := testCtx(t, 20*time.Second)
	b := newBlocker()
	// Submitted first: a draining server with nothing to do stops at once.
	f, err := q.Submit(ctx, []byte("block"))
	require.NoError(t, err)
	s := serve(t, q, b.handle, WithWorkers(2), WithMode(ModeDrain))
	select {
	case <-b.started:
	case <-time.After(5 * time.Second):
		t.Fatal("the task never started")
	}
	// Drain → serve while its task runs: it does not stop when done.
	require.NoError(t, s.SetMode(ModeServe))
	close(b.release)
	_, err = wait(t, f, 5*time.Second)
	require.NoError(t, err)
	f2, err := q.Submit(ctx, []byte("after"))
	require.NoError(t, err)
	res, err := wait(t, f2, 5*time.Second)
	require.NoError(t, err)
	assert.Equal(t, "after#1", string(res), "a server switched back to serve stopped")
	select {
	case <-s.Done():
		t.Fatal("a serving server stopped")
	default:
	}
	// Serve → drain while idle: it stops at once.
	start := time.Now()
	require.NoError(t, s.SetMode(ModeDrain))
	done(t, s, 5*time.Second)
	t.Logf("an idle server switched to drain stopped in %v", time.Since(start))
	assert.ErrorIs(t, s.SetMode(ModeDrain), ErrStopped)
	assert.ErrorIs(t, s.SetMode(Mode(7)), ErrInvalidOption)
	_, err = q.Serve(echo, WithMode(Mode(-1)))
	assert.ErrorIs(t, err, ErrInvalidOption)
}
