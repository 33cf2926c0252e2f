package rmap

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/shepherd-go/shepherd/internal/keys"
	"github.com/shepherd-go/shepherd/internal/redistest"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

var srv *redistest.Server

func TestMain(m *testing.M) { redistest.Main(m, &srv) }

func testCtx(t testing.TB) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	t.Cleanup(cancel)
	return ctx
}

// join joins name on rdb and closes the map when the test ends.
func join(t testing.TB, rdb redis.UniversalClient, name string, opts ...Option) *Map {
	t.Helper()
	m, err := Join(testCtx(t), rdb, name, opts...)
	require.NoError(t, err)
	t.Cleanup(func() { assert.NoError(t, m.Close()) })
	return m
}

// redisContent reads the map's hash with HGETALL.
func redisContent(t testing.TB, rdb redis.UniversalClient, m *Map) map[string]string {
	t.Helper()
	h, err := rdb.HGetAll(testCtx(t), m.keys[0]).Result()
	require.NoError(t, err)
	return h
}

// requireConverged waits until every replica's copy equals the hash in
// Redis.
func requireConverged(t *testing.T, rdb redis.UniversalClient, ms ...*Map) {
	t.Helper()
	var last string
	ok := assert.Eventually(t, func() bool {
		want := redisContent(t, rdb, ms[0])
		for i, m := range ms {
			if got := m.Map(); !assert.ObjectsAreEqual(want, got) {
				last = fmt.Sprintf("replica %d: %d entries, Redis %d", i, len(got), len(want))
				return false
			}
		}
		return true
	}, 10*time.Second, 5*time.Millisecond)
	if !ok {
		t.Fatalf("replicas did not converge: %s", last)
	}
}

func TestSetGetReadYourWrites(t *testing.T) {
	t.Parallel()
	ctx := testCtx(t)
	name := redistest.Name(t)
	a := join(t, srv.NewClient(), name)
	b := join(t, srv.NewClient(), name)

	r, err := a.Set(ctx, "k", "v1")
	require.NoError(t, err)
	assert.True(t, r.Applied)
	assert.False(t, r.Existed)
	assert.EqualValues(t, 1, r.Rev)
	v, ok := a.Get("k") // no wait: read your writes
	assert.True(t, ok)
	assert.Equal(t, "v1", v)

	r, err = a.Set(ctx, "k", "v2")
	require.NoError(t, err)
	assert.Equal(t, Result{Applied: true, Prev: "v1", Existed: true, Rev: 2}, r)

	require.NoError(t, b.Sync(ctx))
	v, _ = b.Get("k")
	assert.Equal(t, "v2", v)
	assert.EqualValues(t, 2, b.Rev())

	// Empty values and keys with any bytes, including the message and list
	// separators, round-trip.
	odd := "a b:c\x00\n{}3:x D1 k"
	_, err = b.Set(ctx, odd, "")
	require.NoError(t, err)
	_, err = b.Set(ctx, "empty-next", odd)
	require.NoError(t, err)
	require.NoError(t, a.Sync(ctx))
	v, ok = a.Get(odd)
	assert.True(t, ok)
	assert.Equal(t, "", v)
	v, _ = a.Get("empty-next")
	assert.Equal(t, odd, v)
	assert.Equal(t, []string{"a b:c\x00\n{}3:x D1 k", "empty-next", "k"}, a.Keys())
	assert.Equal(t, 3, a.Len())
	requireConverged(t, srv.Client(), a, b)
}

func TestBadInput(t *testing.T) {
	t.Parallel()
	ctx := testCtx(t)
	rdb := srv.Client()
	_, err := Join(ctx, nil, "x")
	assert.ErrorIs(t, err, ErrInvalidOption)
	var nilClient *redis.Client
	_, err = Join(ctx, nilClient, "x")
	assert.ErrorIs(t, err, ErrInvalidOption)
	_, err = Join(ctx, rdb, "")
	assert.ErrorIs(t, err, ErrInvalidOption)
	_, err = Join(ctx, rdb, "a}b")
	assert.ErrorIs(t, err, ErrInvalidOption)
	assert.ErrorIs(t, err, keys.ErrInvalidTag)
	assert.NotPanics(t, func() { _, err = Join(ctx, rdb, "x", nil) })
	assert.ErrorIs(t, err, ErrInvalidOption, "a nil option")
	for _, o := range []Option{WithHashTag(""), WithMaxValueSize(0), WithCheckInterval(0), WithSubscriberBuffer(0), WithLogger(nil)} {
		_, err = Join(ctx, rdb, "x", o)
		assert.ErrorIs(t, err, ErrInvalidOption)
	}
	cctx, cancel := context.WithCancel(ctx)
	cancel()
	_, err = Join(cctx, rdb, "x")
	assert.ErrorIs(t, err, context.Canceled)

	m := join(t, srv.NewClient(), "a}b", WithHashTag(redistest.Name(t)), WithMaxValueSize(8))
	_, err = m.Set(ctx, "", "v")
	assert.ErrorIs(t, err, ErrEmptyKey)
	_, err = m.Set(ctx, "k", "123456789")
	assert.ErrorIs(t, err, ErrTooLarge)
	_, err = m.Set(ctx, "123456789", "v")
	assert.ErrorIs(t, err, ErrTooLarge)
	_, err = m.AppendValues(ctx, "l", "123456") // "6:123456" is 8 bytes
	require.NoError(t, err)
	_, err = m.AppendValues(ctx, "l", "")
	assert.ErrorIs(t, err, ErrTooLarge, "the list after the append is bounded too")
	vals, _ := m.GetValues("l")
	assert.Equal(t, []string{"123456"}, vals)
	_, err = m.Delete(ctx, "")
	assert.ErrorIs(t, err, ErrEmptyKey)
	_, err = m.Inc(ctx, "", 1)
	assert.ErrorIs(t, err, ErrEmptyKey)

	require.NoError(t, m.Close())
	require.NoError(t, m.Close(), "Close is idempotent")
	_, err = m.Set(ctx, "k", "v")
	assert.ErrorIs(t, err, ErrClosed)
	_, err = m.Reset(ctx)
	assert.ErrorIs(t, err, ErrClosed)
	_, err = m.Destroy(ctx)
	assert.ErrorIs(t, err, ErrClosed)
	assert.ErrorIs(t, m.Sync(ctx), ErrClosed)
	ch, cancelSub := m.Subscribe()
	_, open := <-ch
	assert.False(t, open)
	cancelSub()
	vals, _ = m.GetValues("l")
	assert.Equal(t, []string{"123456"}, vals, "reads serve the last copy after Close")

	// The hash tag is in every key.
	assert.True(t, strings.HasPrefix(m.keys[0], "shepherd:{"), m.keys[0])
}

func TestTestAndSetRace(t *testing.T) {
	t.Parallel()
	ctx := testCtx(t)
	name := redistest.Name(t)
	const replicas, goroutines = 3, 16
	ms := make([]*Map, replicas)
	for i := range ms {
		ms[i] = join(t, srv.NewClient(), name)
	}
	_, err := ms[0].Set(ctx, "lease", "free")
	require.NoError(t, err)
	for _, m := range ms {
		require.NoError(t, m.Sync(ctx))
	}
	var (
		wg      sync.WaitGroup
		mu      sync.Mutex
		winners []string
	)
	start := make(chan struct{})
	for g := range goroutines {
		wg.Add(1)
		go func() {
			defer wg.Done()
			<-start
			me := fmt.Sprint("g", g)
			r, err := ms[g%replicas].TestAndSet(ctx, "lease", "free", me)
			if !assert.NoError(t, err) {
				return
			}
			if r.Applied {
				mu.Lock()
				winners = append(winners, me)
				mu.Unlock()
			} else {
				assert.True(t, r.Existed)
				assert.NotEqual(t, "free", r.Prev, "a loser sees the winner")
			}
		}()
	}
	close(start)
	wg.Wait()
	require.Len(t, winners, 1, "exactly one TestAndSet wins")
	requireConverged(t, srv.Client(), ms...)
	v, _ := ms[1].Get("lease")
	assert.Equal(t, winners[0], v)
}

func TestJoinSeesExistingContent(t *testing.T) {
	t.Parallel()
	ctx := testCtx(t)
	name := redistest.Name(t)
	a := join(t, srv.NewClient(), name, WithHashTag("pool-"+name))
	for i := range 50 {
		_, err := a.Set(ctx, fmt.Sprint(i), fmt.Sprint(i*i))
		require.NoError(t, err)
	}
	b := join(t, srv.NewClient(), name, WithHashTag("pool-"+name))
	assert.Equal(t, a.Map(), b.Map())
	assert.EqualValues(t, 50, b.Rev())
	other := join(t, srv.NewClient(), name) // another tag: another map
	assert.Zero(t, other.Len())
}

func TestJoinUnreachable(t *testing.T) {
	t.Parallel()
	rdb := redis.NewClient(&redis.Options{Addr: "127.0.0.1:1", MaxRetries: -1})
	defer rdb.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	_, err := Join(ctx, rdb, "x")
	require.Error(t, err)
	assert.False(t, errors.Is(err, context.DeadlineExceeded), "fails at once, not at the deadline: %v", err)
}

func TestSnapshotAndVersion(t *testing.T) {
	t.Parallel()
	ctx := testCtx(t)
	name := redistest.Name(t)
	a := join(t, srv.Client(), name)
	b := join(t, srv.Client(), name)
	v0 := b.Version()
	_, err := a.Set(ctx, "k", "1")
	require.NoError(t, err)
	require.NoError(t, b.Sync(ctx))
	data, rev, v1 := b.Snapshot()
	assert.Equal(t, map[string]string{"k": "1"}, data)
	assert.Equal(t, a.Rev(), rev)
	assert.Greater(t, v1, v0, "a replicated change moves the version")
	assert.Equal(t, v1, b.Version())

	data["k"] = "changed by the caller"
	got, _ := b.Get("k")
	assert.Equal(t, "1", got, "a snapshot is a copy")

	// The writer's own applied write moves its version too.
	_, err = b.Set(ctx, "k", "3")
	require.NoError(t, err)
	assert.Greater(t, b.Version(), v1)
}
