package streaming

import (
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/shepherd-go/shepherd/internal/redistest"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func addN(t testing.TB, s *Stream, n int) []string {
	t.Helper()
	entries := make([]Entry, n)
	for i := range entries {
		entries[i] = Entry{Event: "job", Payload: []byte(fmt.Sprint(i))}
	}
	ids, err := s.AddBatch(testCtx(t), entries)
	require.NoError(t, err)
	return ids
}

func pendingCount(t testing.TB, s *Stream, group string) int64 {
	t.Helper()
	n, err := s.Pending(testCtx(t), group)
	require.NoError(t, err)
	return n
}

func TestSinkDeliversInOrderAndAcks(t *testing.T) {
	t.Parallel()
	ctx := testCtx(t)
	s := newStream(t, nil)
	ids := addN(t, s, 5) // before the sink: StartAtOldest is the default
	sink := newSink(t, s, "g")
	ids = append(ids, addN(t, s, 5)...)
	evs := recvN(t, sink.Subscribe(), 10, 5*time.Second)
	for i, ev := range evs {
		assert.Equal(t, ids[i], ev.ID)
		assert.Equal(t, fmt.Sprint(i%5), string(ev.Payload))
	}
	assert.EqualValues(t, 10, pendingCount(t, s, "g"))
	require.NoError(t, sink.Ack(ctx, evs[0]))
	require.NoError(t, sink.AckBatch(ctx, evs[1:]))
	assert.Zero(t, pendingCount(t, s, "g"))
	require.NoError(t, sink.Ack(ctx, evs[0]), "acking twice is harmless")

	assert.ErrorIs(t, sink.Ack(ctx, &Event{ID: "1-1", Stream: "elsewhere"}), ErrInvalidEvent)
	assert.ErrorIs(t, sink.Ack(ctx, nil), ErrInvalidEvent)
}

func TestSinkStartPositions(t *testing.T) {
	t.Parallel()
	s := newStream(t, nil)
	old := addN(t, s, 3)
	newest := newSink(t, s, "newest", StartAtNewest())
	after := newSink(t, s, "after", StartAfter(old[0]))
	atTime := newSink(t, s, "time", StartAtTime((&Event{ID: old[2]}).Time()))
	ids := addN(t, s, 1)
	assert.Equal(t, ids[0], recv(t, newest.Subscribe(), 5*time.Second).ID)
	assert.Equal(t, old[1], recv(t, after.Subscribe(), 5*time.Second).ID)
	ev := recv(t, atTime.Subscribe(), 5*time.Second)
	assert.False(t, ev.Time().Before((&Event{ID: old[2]}).Time()))
}

func TestSinkDeleteOnAck(t *testing.T) {
	t.Parallel()
	ctx := testCtx(t)
	s := newStream(t, nil)
	sink := newSink(t, s, "g", WithDeleteOnAck())
	addN(t, s, 3)
	evs := recvN(t, sink.Subscribe(), 3, 5*time.Second)
	require.NoError(t, sink.AckBatch(ctx, evs))
	n, err := s.Len(ctx)
	require.NoError(t, err)
	assert.Zero(t, n)
	assert.Zero(t, pendingCount(t, s, "g"))
}

func TestSinksInOneGroupGetDistinctEntries(t *testing.T) {
	t.Parallel()
	ctx := testCtx(t)
	s := newStream(t, nil)
	const consumers, total = 3, 300
	var (
		mu   sync.Mutex
		seen = map[string]int{}
		wg   sync.WaitGroup
	)
	perSink := make([]int, consumers)
	// Registered first, so it runs last: after the sinks' cleanups have
	// closed their channels.
	t.Cleanup(wg.Wait)
	for i := 0; i < consumers; i++ {
		// Small reads, so that every sink gets a share.
		sink := newSink(t, s, "g", WithMaxPolled(5))
		wg.Add(1)
		go func() {
			defer wg.Done()
			for ev := range sink.Subscribe() {
				if !assert.NoError(t, sink.Ack(ctx, ev)) {
					return
				}
				mu.Lock()
				seen[ev.ID]++
				perSink[i]++
				mu.Unlock()
			}
		}()
	}
	for i := 0; i < total/10; i++ {
		addN(t, s, 10)
	}
	require.Eventually(t, func() bool {
		mu.Lock()
		defer mu.Unlock()
		return len(seen) == total
	}, 10*time.Second, 5*time.Millisecond)
	mu.Lock()
	defer mu.Unlock()
	for id, n := range seen {
		assert.Equal(t, 1, n, "entry %s delivered %d times", id, n)
	}
	busy := 0
	for _, n := range perSink {
		if n > 0 {
			busy++
		}
	}
	assert.Greater(t, busy, 1, "entries spread over the group's consumers: %v", perSink)
}

// A consumer that read an entry and went silent (a crashed process): the
// sink reclaims the entry once it has been idle for the grace period.
func TestUnackedEntryRedeliveredToAnotherConsumerAfterGrace(t *testing.T) {
	t.Parallel()
	ctx := testCtx(t)
	s := newStream(t, nil)
	const grace = 300 * time.Millisecond
	sink := newSink(t, s, "g", WithAckGracePeriod(grace))
	// The group exists, but no sink reads while the ghost takes the entry.
	require.NoError(t, sink.Close(ctx))
	ids := addN(t, s, 1)
	readAt := time.Now()
	res, err := s.rdb.XReadGroup(ctx, &redis.XReadGroupArgs{
		Group: "g", Consumer: "ghost", Streams: []string{s.Key(), ">"}, Count: 10,
	}).Result()
	require.NoError(t, err)
	require.Len(t, res[0].Messages, 1)

	other := newSink(t, s, "g", WithAckGracePeriod(grace))
	ev := recv(t, other.Subscribe(), 5*time.Second)
	assert.Equal(t, ids[0], ev.ID)
	assert.True(t, ev.Reclaimed)
	assert.GreaterOrEqual(t, time.Since(readAt), grace, "reclaimed before the grace period")
	require.NoError(t, other.Ack(ctx, ev))
	assert.Zero(t, pendingCount(t, s, "g"))
	// The ghost owns nothing and its keep-alive (it has none; Redis's idle
	// time stands in) lapses: it is removed.
	require.Eventually(t, func() bool {
		cs, err := s.rdb.XInfoConsumers(ctx, s.Key(), "g").Result()
		if err != nil {
			return false
		}
		for _, c := range cs {
			if c.Name == "ghost" {
				return false
			}
		}
		return true
	}, 5*time.Second, 10*time.Millisecond, "the dead consumer was never removed")
}

// A sink closed (or crashed) without acking keeps its entries pending;
// another consumer gets them all, and the dead consumer is deleted only
// after that.
func TestDeadSinkLosesNothing(t *testing.T) {
	t.Parallel()
	ctx := testCtx(t)
	s := newStream(t, nil)
	const grace = 300 * time.Millisecond
	dying, err := NewSink(ctx, s, "g", append(fast(), WithAckGracePeriod(grace))...)
	require.NoError(t, err)
	ids := addN(t, s, 20)
	evs := recvN(t, dying.Subscribe(), 20, 5*time.Second)
	require.NoError(t, dying.Close(ctx))
	assert.Len(t, evs, 20)
	assert.EqualValues(t, 20, pendingCount(t, s, "g"))
	cs, err := s.rdb.XInfoConsumers(ctx, s.Key(), "g").Result()
	require.NoError(t, err)
	require.Len(t, cs, 1, "a closing sink that owns entries stays in the group")

	survivor := newSink(t, s, "g", WithAckGracePeriod(grace))
	got := map[string]bool{}
	for _, ev := range recvN(t, survivor.Subscribe(), 20, 10*time.Second) {
		assert.True(t, ev.Reclaimed)
		got[ev.ID] = true
		require.NoError(t, survivor.Ack(ctx, ev))
	}
	for _, id := range ids {
		assert.True(t, got[id], "entry %s lost", id)
	}
	require.Eventually(t, func() bool {
		cs, err := s.rdb.XInfoConsumers(ctx, s.Key(), "g").Result()
		return err == nil && len(cs) == 1 && cs[0].Name == survivor.Consumer()
	}, 5*time.Second, 10*time.Millisecond, "the dead consumer was never removed")
}

// A sink that restarts under its consumer name first gets what it had been
// delivered and had not acknowledged, without waiting for the grace period.
func TestNamedConsumerResumesItsPendingEntries(t *testing.T) {
	t.Parallel()
	ctx := testCtx(t)
	s := newStream(t, nil)
	first, err := NewSink(ctx, s, "g", append(fast(), WithConsumer("worker-1"))...)
	require.NoError(t, err)
	ids := addN(t, s, 3)
	recvN(t, first.Subscribe(), 3, 5*time.Second)
	require.NoError(t, first.Close(ctx))

	again := newSink(t, s, "g", WithConsumer("worker-1"))
	evs := recvN(t, again.Subscribe(), 3, 5*time.Second)
	for i, ev := range evs {
		assert.Equal(t, ids[i], ev.ID)
		assert.False(t, ev.Reclaimed)
	}
	more := addN(t, s, 1)
	assert.Equal(t, more[0], recv(t, again.Subscribe(), 5*time.Second).ID)
}

func TestCloseIsIdempotentAndClosesChannel(t *testing.T) {
	t.Parallel()
	ctx := testCtx(t)
	s := newStream(t, nil)
	sink, err := NewSink(ctx, s, "g")
	require.NoError(t, err)
	require.NoError(t, sink.Close(ctx))
	require.NoError(t, sink.Close(ctx))
	_, ok := <-sink.Subscribe()
	assert.False(t, ok)
	cs, err := s.rdb.XInfoConsumers(ctx, s.Key(), "g").Result()
	require.NoError(t, err)
	assert.Empty(t, cs, "a sink that owned nothing leaves its group on Close")

	r, err := NewReader(ctx, s)
	require.NoError(t, err)
	require.NoError(t, r.Close(ctx))
	require.NoError(t, r.Close(ctx))
	_, ok = <-r.Subscribe()
	assert.False(t, ok)
}

// The routing step of the pool: receive from one stream, forward to
// another, then acknowledge.
func TestForwardEventToAnotherStream(t *testing.T) {
	t.Parallel()
	ctx := testCtx(t)
	tag := redistest.Name(t) // a pool's streams share one tag
	jobs, err := NewStream(srv.Client(), tag, "jobs")
	require.NoError(t, err)
	worker, err := NewStream(srv.Client(), tag, "worker-1")
	require.NoError(t, err)
	assert.Zero(t, pendingCount(t, worker, "g"), "Pending of a missing stream is 0")

	sink := newSink(t, jobs, "routers")
	_, err = jobs.Add(ctx, "start", []byte("p"), WithTopic("tenant-1"))
	require.NoError(t, err)
	ev := recv(t, sink.Subscribe(), 5*time.Second)
	assert.Same(t, jobs, sink.Stream())
	_, err = worker.AddBatch(ctx, []Entry{ev.Entry()})
	require.NoError(t, err)
	require.NoError(t, sink.Ack(ctx, ev))

	r, err := NewReader(ctx, worker, StartAtOldest())
	require.NoError(t, err)
	defer func() { require.NoError(t, r.Close(ctx)) }()
	got := recv(t, r.Subscribe(), 5*time.Second)
	assert.Equal(t, ev.Entry(), got.Entry())
	assert.Equal(t, "worker-1", got.Stream)
}

// Work finished during shutdown can still be acknowledged.
func TestAckAfterClose(t *testing.T) {
	t.Parallel()
	ctx := testCtx(t)
	s := newStream(t, nil)
	sink, err := NewSink(ctx, s, "g", fast()...)
	require.NoError(t, err)
	addN(t, s, 1)
	ev := recv(t, sink.Subscribe(), 5*time.Second)
	require.NoError(t, sink.Close(ctx))
	require.NoError(t, sink.Ack(ctx, ev))
	assert.Zero(t, pendingCount(t, s, "g"))
}
