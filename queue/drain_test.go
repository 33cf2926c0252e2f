package queue

import (
	"context"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/shepherd-go/shepherd/internal/redistest"
)

// modes waits until Stats shows each process of want with its mode.
func modes(t *testing.T, c *Client, want map[string]string) {
	t.Helper()
	var last []ProcessInfo
	require.Eventually(t, func() bool {
		st, err := c.Stats(context.Background())
		if err != nil {
			return false
		}
		last = st.Processes
		got := map[string]string{}
		for _, p := range st.Processes {
			got[p.ID] = p.Mode
		}
		for id, m := range want {
			if v, ok := got[id]; !ok || v != m {
				return false
			}
		}
		return true
	}, 5*time.Second, 10*time.Millisecond, "want modes %v, Stats shows %+v", want, &last)
}

func notDone(t *testing.T, s *Server, why string) {
	t.Helper()
	select {
	case <-s.Done():
		t.Fatal(why)
	default:
	}
}

// TestDrainFromOutside: an operator's Drain switches a serving process
// with a backlog to drain at once (by pub/sub: the TTL is long, so a
// keep-alive would come too late); it runs its task in flight and the
// backlog, then stops. A process that only submits is not asked.
func TestDrainFromOutside(t *testing.T) {
	t.Parallel()
	name := redistest.Name(t)
	a := open(t, name, WithTTL(30*time.Second)) // keep-alives every 10s
	b := open(t, name)                          // only submits
	ctx := testCtx(t, 30*time.Second)
	bl := newBlocker()
	t.Cleanup(func() { // before the Queues close, should the test fail first
		select {
		case <-bl.release:
		default:
			close(bl.release)
		}
	})
	s := serve(t, a, bl.handle, WithWorkers(1))
	first, err := b.Submit(ctx, []byte("block"))
	require.NoError(t, err)
	select {
	case <-bl.started:
	case <-time.After(5 * time.Second):
		t.Fatal("the task never started")
	}
	var backlog []*Future
	for range 5 {
		f, err := b.Submit(ctx, []byte("x"))
		require.NoError(t, err)
		backlog = append(backlog, f)
	}
	later, err := b.Submit(ctx, []byte("later"), WithDelay(time.Hour))
	require.NoError(t, err)
	c, err := NewClient(srv.Client(), name)
	require.NoError(t, err)
	modes(t, c, map[string]string{a.Process(): "serve", b.Process(): ""})

	n, err := c.Drain(ctx)
	require.NoError(t, err)
	assert.Equal(t, 1, n, "processes asked")
	require.Eventually(t, func() bool { return s.Mode() == ModeDrain }, 5*time.Second, time.Millisecond,
		"the server did not switch to drain")
	modes(t, c, map[string]string{a.Process(): "drain", b.Process(): ""})
	notDone(t, s, "the server stopped with its task in flight")

	close(bl.release)
	done(t, s, 10*time.Second)
	for _, f := range append(backlog, first) {
		_, err := wait(t, f, 5*time.Second)
		require.NoError(t, err)
	}
	assert.Len(t, bl.saw(), 6, "the backlog did not run before the server stopped")
	st, err := c.Stats(ctx)
	require.NoError(t, err)
	assert.Zero(t, st.Available+st.InFlight, "tasks left: %+v", st)
	info, err := c.Inspect(ctx, later.ID())
	require.NoError(t, err)
	assert.Equal(t, StateDelayed, info.State, "a task not due is left")
	modes(t, c, map[string]string{a.Process(): ""}) // drained: it serves no more
}

// TestDrainSparesServersStartedLater: Drain names the servers running
// when it is called; a new server of the same process, or of a process
// opened later, serves as usual.
func TestDrainSparesServersStartedLater(t *testing.T) {
	t.Parallel()
	name := redistest.Name(t)
	a := open(t, name, WithTTL(time.Second)) // keep-alives every 333ms
	ctx := testCtx(t, 30*time.Second)
	s1 := serve(t, a, echo, WithWorkers(1))
	modes(t, &a.Client, map[string]string{a.Process(): "serve"})
	n, err := a.Drain(ctx) // a Queue is a Client
	require.NoError(t, err)
	assert.Equal(t, 1, n)
	done(t, s1, 5*time.Second)

	s2 := serve(t, a, echo, WithWorkers(1))
	c := open(t, name)
	s3 := serve(t, c, echo, WithWorkers(1))
	// Once both have kept alive with their new servers and no request is
	// left, nothing can drain them any more.
	modes(t, &a.Client, map[string]string{a.Process(): "serve", c.Process(): "serve"})
	require.Eventually(t, func() bool {
		n, err := srv.Client().HLen(ctx, a.lay.drains).Result()
		return err == nil && n == 0
	}, 5*time.Second, 10*time.Millisecond, "a drain request is left")
	for _, s := range []*Server{s2, s3} {
		assert.Equal(t, ModeServe, s.Mode())
		notDone(t, s, "a server started after Drain stopped")
	}
	f, err := a.Submit(ctx, []byte("after"))
	require.NoError(t, err)
	res, err := wait(t, f, 5*time.Second)
	require.NoError(t, err)
	assert.Equal(t, "after#1", string(res))
	require.NoError(t, s2.Stop(ctx))
	require.NoError(t, s3.Stop(ctx))
}

// TestDrainRequestWaitsForTheKeepAlive: a process that missed the
// pub/sub message (here: none was sent) applies its request at its next
// keep-alive; a request naming a server of the process that stopped
// before it applied it is dropped, not applied to its new server.
func TestDrainRequestWaitsForTheKeepAlive(t *testing.T) {
	t.Parallel()
	name := redistest.Name(t)
	a := open(t, name, WithTTL(time.Second))
	ctx := testCtx(t, 30*time.Second)
	s1 := serve(t, a, echo, WithWorkers(1))
	require.NoError(t, srv.Client().HSet(ctx, a.lay.drains, a.Process(), strconv.FormatInt(s1.serial, 10)).Err())
	done(t, s1, 5*time.Second)
	assert.Equal(t, ModeDrain, s1.Mode())

	gone := serve(t, a, echo, WithWorkers(1))
	require.NoError(t, gone.Stop(ctx))
	s2 := serve(t, a, echo, WithWorkers(1))
	modes(t, &a.Client, map[string]string{a.Process(): "serve"})
	require.NoError(t, srv.Client().HSet(ctx, a.lay.drains, a.Process(), strconv.FormatInt(gone.serial, 10)).Err())
	require.Eventually(t, func() bool {
		n, err := srv.Client().HExists(ctx, a.lay.drains, a.Process()).Result()
		return err == nil && !n
	}, 5*time.Second, 10*time.Millisecond, "the stale request was not dropped")
	assert.Equal(t, ModeServe, s2.Mode(), "a request for a server gone drained the new one")
	notDone(t, s2, "a request for a server gone stopped the new one")
	require.NoError(t, s2.Stop(ctx))
}

func TestDrainMissingQueue(t *testing.T) {
	t.Parallel()
	name := redistest.Name(t)
	ctx := testCtx(t, 10*time.Second)
	c, err := NewClient(srv.Client(), name)
	require.NoError(t, err)
	n, err := c.Drain(ctx)
	require.ErrorIs(t, err, ErrQueueNotFound)
	assert.Contains(t, err.Error(), name)
	assert.Zero(t, n)
	keys, err := srv.Client().Keys(ctx, "shepherd:{"+name+"}:*").Result()
	require.NoError(t, err)
	assert.Empty(t, keys, "Drain of a missing queue wrote")

	open(t, name) // only submits
	// A request left by a process gone for good is dropped.
	require.NoError(t, srv.Client().HSet(ctx, c.lay.drains, "ghost", "1").Err())
	n, err = c.Drain(ctx)
	require.NoError(t, err)
	assert.Zero(t, n, "a process that does not serve was asked")
	left, err := srv.Client().HLen(ctx, c.lay.drains).Result()
	require.NoError(t, err)
	assert.Zero(t, left, "drain requests left")
}

// A take begun before the drain was asked for may have read Redis before
// a task the drain must run was queued: its empty reply does not end the
// drain, a take begun in ModeDrain does.
func TestATakeBegunBeforeTheDrainDoesNotEndIt(t *testing.T) {
	t.Parallel()
	q := open(t, redistest.Name(t))
	ctx := testCtx(t, 20*time.Second)
	held, goOn := make(chan struct{}), make(chan struct{})
	var armed atomic.Bool
	var once sync.Once
	hook := withAfterRound(func(r round) {
		if armed.Load() && r.n > 0 && len(r.tasks) == 0 && !r.drain {
			once.Do(func() { close(held); <-goOn })
		}
	})
	srv := serve(t, q, echo, WithWorkers(1), hook)
	armed.Store(true)
	// An empty take, held after its reply until the task is queued and
	// the drain asked for.
	require.NoError(t, q.rdb.Publish(ctx, q.lay.chanPrefix+"wake", "").Err())
	select {
	case <-held:
	case <-ctx.Done():
		t.Fatal("no empty take")
	}
	f, err := q.Submit(ctx, []byte("x"))
	require.NoError(t, err)
	require.NoError(t, srv.SetMode(ModeDrain))
	close(goOn)
	res, err := wait(t, f, 5*time.Second)
	require.NoError(t, err, "the drain ended with the task left")
	assert.Equal(t, "x#1", string(res))
	select {
	case <-srv.Done():
	case <-ctx.Done():
		t.Fatal("the drained server did not stop")
	}
}

// withAfterRound has feed call h after each round, before it looks
// whether the server drained.
func withAfterRound(h func(round)) ServeOption {
	return func(c *serveConfig) error {
		c.afterRound = h
		return nil
	}
}
