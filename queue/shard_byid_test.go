package queue

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/shepherd-go/shepherd/internal/redistest"
)

// Calls by id on a sharded queue: each finds its task in the shard that
// holds it, at the cost of one shard's read when the id names it.

// Cancel finds a task of any shard, by an id the package made or a
// caller's; its future completes through its shard's done channel, and
// the cancelled tasks of every shard are listed newest first.
func TestShardedCancelResultAndFinishedList(t *testing.T) {
	t.Parallel()
	ctx := testCtx(t, 20*time.Second)
	q, c, tenants := openSharded(t, ctx, 1)
	var futures []*Future
	for i, ten := range tenants {
		f, err := q.Submit(ctx, nil, WithTenant(ten), WithTaskID(idAwayFrom(t, fmt.Sprint("c", i), i, 3)))
		require.NoError(t, err)
		futures = append(futures, f)
		f, err = q.Submit(ctx, nil, WithTenant(ten))
		require.NoError(t, err)
		futures = append(futures, f)
	}
	var order []string // newest first
	for _, f := range futures {
		require.NoError(t, c.Cancel(ctx, f.ID()))
		_, err := wait(t, f, 5*time.Second)
		require.ErrorIs(t, err, ErrCancelled, f.ID())
		_, err = c.Result(ctx, f.ID())
		require.ErrorIs(t, err, ErrCancelled, f.ID())
		order = append([]string{f.ID()}, order...)
		time.Sleep(2 * time.Millisecond) // distinct finish times: the merge goes by them
	}
	require.ErrorIs(t, c.Cancel(ctx, "nowhere"), ErrTaskNotFound)
	list, err := c.Tasks(ctx, StateCancelled, 0, 10)
	require.NoError(t, err)
	assert.Equal(t, order, ids(list))
	list, err = c.Tasks(ctx, StateCancelled, 1, 3)
	require.NoError(t, err)
	assert.Equal(t, order[1:4], ids(list))
}

// The outcome poll (for lost pub/sub messages) reads each future's task
// in the shard that holds it, a caller's id in its tenant's shard too,
// and calls lost only a task no shard holds.
func TestShardedPollFindsOutcomesInEveryShard(t *testing.T) {
	t.Parallel()
	ctx := testCtx(t, 20*time.Second)
	name := redistest.Name(t)
	q := open(t, name, WithShards(3))
	other := open(t, name)
	tenants := registerTenantsByShard(t, ctx, q, 3, 1)
	serve(t, other, echo, WithWorkers(2))
	var done []string
	for i, ten := range tenants {
		f, err := other.Submit(ctx, []byte(ten), WithTenant(ten), WithTaskID(idAwayFrom(t, fmt.Sprint("p", i), i, 3)))
		require.NoError(t, err)
		_, err = wait(t, f, 5*time.Second)
		require.NoError(t, err)
		done = append(done, f.ID())
	}
	// q waits for them as if it had submitted them and missed the
	// messages.
	var pending []*Future
	for _, id := range append(done, "lost-one") {
		f := newFuture(q, id)
		f.submitted.Store(true)
		pending = append(pending, f)
	}
	q.pollOutcomes(ctx, pending)
	for i, f := range pending[:3] {
		require.True(t, f.isDone(), f.ID())
		res, err := f.Wait(ctx)
		require.NoError(t, err)
		assert.Equal(t, tenants[i]+"#1", string(res))
	}
	require.True(t, pending[3].isDone())
	_, err := pending[3].Wait(ctx)
	require.ErrorIs(t, err, ErrOutcomeLost)
}

// A handler's progress is recorded in its task's shard and read from
// there by Future.Progress and Inspect.
func TestShardedProgress(t *testing.T) {
	t.Parallel()
	ctx := testCtx(t, 20*time.Second)
	name := redistest.Name(t)
	q := open(t, name, WithShards(3))
	tenants := registerTenantsByShard(t, ctx, q, 3, 1)
	reported := make(chan struct{}, 1)
	release := make(chan struct{})
	var once sync.Once
	t.Cleanup(func() { once.Do(func() { close(release) }) }) // before the Queue's Close, if the test fails
	serve(t, q, func(ctx context.Context, task *Task) ([]byte, error) {
		if err := task.Progress(ctx, 42, "half"); err != nil {
			return nil, err
		}
		reported <- struct{}{}
		select {
		case <-release:
		case <-ctx.Done():
		}
		return nil, nil
	}, WithWorkers(1))
	ten := tenants[2]
	f, err := q.Submit(ctx, nil, WithTenant(ten), WithTaskID(idAwayFrom(t, "prog", 2, 3)))
	require.NoError(t, err)
	select {
	case <-reported:
	case <-ctx.Done():
		t.Fatal("the handler did not report")
	}
	p, err := f.Progress(ctx)
	require.NoError(t, err)
	require.NotNil(t, p)
	assert.Equal(t, 42.0, p.Value)
	info, err := q.Inspect(ctx, f.ID())
	require.NoError(t, err)
	require.NotNil(t, info.Progress)
	assert.Equal(t, "half", info.Progress.Message)
	once.Do(func() { close(release) })
	_, err = wait(t, f, 5*time.Second)
	require.NoError(t, err)
}

// roundTrips counts the round trips to Redis (a command or a pipeline
// each) of the calls made with a ctx it marked: not the process's own
// loops.
type roundTrips struct{ n atomic.Int64 }

type countedKey struct{}

func (r *roundTrips) mark(ctx context.Context) context.Context {
	return context.WithValue(ctx, countedKey{}, true)
}
func (r *roundTrips) count(ctx context.Context) {
	if ctx.Value(countedKey{}) != nil {
		r.n.Add(1)
	}
}
func (r *roundTrips) DialHook(next redis.DialHook) redis.DialHook { return next }
func (r *roundTrips) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		r.count(ctx)
		return next(ctx, cmd)
	}
}
func (r *roundTrips) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		r.count(ctx)
		return next(ctx, cmds)
	}
}

// The readers and the calls by id cost on a queue of one shard what they
// did before sharding (its layouts are known to a Queue), and a call by
// an id the package made costs one read on a queue of many.
func TestReadersCostNoMoreOnOneShard(t *testing.T) {
	t.Parallel()
	ctx := testCtx(t, 20*time.Second)
	for _, n := range []int{1, 3} {
		rdb := srv.NewClient()
		t.Cleanup(func() { _ = rdb.Close() })
		q, err := Open(ctx, rdb, redistest.Name(t), WithShards(n))
		require.NoError(t, err)
		t.Cleanup(func() { require.NoError(t, closeWithin(q)) })
		f, err := q.Submit(ctx, []byte("x"), WithDelay(time.Hour))
		require.NoError(t, err)
		warm, err := q.Submit(ctx, []byte("x"), WithDelay(time.Hour))
		require.NoError(t, err)
		require.NoError(t, q.Cancel(ctx, warm.ID())) // the script loaded: EVALSHA alone from now on
		trips := &roundTrips{}
		rdb.AddHook(trips)
		cost := func(call func(ctx context.Context) error) int64 {
			t.Helper()
			before := trips.n.Load()
			require.NoError(t, call(trips.mark(ctx)))
			return trips.n.Load() - before
		}
		byID := map[string]func(context.Context) error{
			"Inspect": func(ctx context.Context) error { _, err := q.Inspect(ctx, f.ID()); return err },
			"Result": func(ctx context.Context) error {
				if _, err := q.Result(ctx, f.ID()); !errors.Is(err, ErrNotFinished) {
					return err
				}
				return nil
			},
			"Future.Progress": func(ctx context.Context) error { _, err := f.Progress(ctx); return err },
		}
		for call, fn := range byID {
			assert.EqualValues(t, 1, cost(fn), "%s on %d shards", call, n)
		}
		if n == 1 {
			assert.EqualValues(t, 1, cost(func(ctx context.Context) error { _, err := q.Stats(ctx); return err }), "Stats")
			assert.EqualValues(t, 2, cost(func(ctx context.Context) error { _, err := q.Tasks(ctx, StateDelayed, 0, 10); return err }), "Tasks")
			assert.EqualValues(t, 1, cost(func(ctx context.Context) error { _, err := q.DeadLetters(ctx, 0, 10); return err }), "DeadLetters (none)")
			assert.EqualValues(t, 2, cost(func(ctx context.Context) error { _, err := q.History(ctx, HistoryFine, 6); return err }), "History")
		}
		assert.EqualValues(t, 1, cost(func(ctx context.Context) error { return q.Cancel(ctx, f.ID()) }), "Cancel on %d shards", n)
	}
}
