package streaming

import (
	"strconv"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/shepherd-go/shepherd/internal/redistest"
	"github.com/shepherd-go/shepherd/internal/script"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// ghostRead makes consumer read n new entries of group without ever
// acknowledging them, like a process that crashed right after reading.
func ghostRead(t testing.TB, s *Stream, group, consumer string, n int) {
	t.Helper()
	res, err := s.rdb.XReadGroup(testCtx(t), &redis.XReadGroupArgs{
		Group: group, Consumer: consumer, Streams: []string{s.Key(), ">"}, Count: int64(n),
	}).Result()
	require.NoError(t, err)
	require.Len(t, res[0].Messages, n)
}

func consumerPending(t testing.TB, s *Stream, group string) map[string]int64 {
	t.Helper()
	cs, err := s.rdb.XInfoConsumers(testCtx(t), s.Key(), group).Result()
	require.NoError(t, err)
	m := map[string]int64{}
	for _, c := range cs {
		m[c.Name] = c.Pending
	}
	return m
}

// A consumer whose keep-alive lapsed but that still owns entries must not
// be deleted (DELCONSUMER would drop its entries); once its entries are
// claimed, it is (docs/ARCHITECTURE.md, failure modes: 3).
func TestSweepDeletesDeadConsumerOnlyAfterItsEntriesAreClaimed(t *testing.T) {
	t.Parallel()
	ctx := testCtx(t)
	s := newStream(t, nil)
	rdb := s.rdb
	_, err := createGroup(ctx, s, "g", "0")
	require.NoError(t, err)
	addN(t, s, 3)
	ghostRead(t, s, "g", "ghost", 3)
	lease, alive := s.ks.lease("g"), s.ks.alive("g")
	require.NoError(t, rdb.HSet(ctx, alive, "ghost", 1).Err(), "a keep-alive from long ago")
	require.NoError(t, rdb.Set(ctx, lease, "tok", time.Minute).Err())

	sweep := func() int64 {
		res, err := script.Run(ctx, rdb, sweepScript, "sweep", []string{lease, s.Key(), alive}, "tok", "g", 1)
		require.NoError(t, err)
		return res.(int64)
	}
	assert.Zero(t, sweep(), "a dead consumer with pending entries must be kept")
	assert.Equal(t, map[string]int64{"ghost": 3}, consumerPending(t, s, "g"))

	res, err := script.Run(ctx, rdb, reclaimScript, "reclaim", []string{lease, s.Key()}, "tok", "g", "rescuer", 0, "0-0", 100)
	require.NoError(t, err)
	_, claimed, ok := parseClaim(res)
	require.True(t, ok)
	assert.Len(t, claimed, 3)

	// The rescuer has a fresh keep-alive; the ghost now owns nothing.
	require.NoError(t, rdb.HSet(ctx, alive, "rescuer", strconv.FormatInt(time.Now().Add(time.Hour).UnixMilli(), 10)).Err())
	assert.EqualValues(t, 1, sweep())
	assert.Equal(t, map[string]int64{"rescuer": 3}, consumerPending(t, s, "g"))
	ghost, err := rdb.HExists(ctx, alive, "ghost").Result()
	require.NoError(t, err)
	assert.False(t, ghost, "the deleted consumer's keep-alive is forgotten")
}

// Reclaim and sweep are fenced by the lease token: a sink that lost the
// lease (after a long pause, say) changes nothing.
func TestReclaimAndSweepAreFencedByTheLease(t *testing.T) {
	t.Parallel()
	ctx := testCtx(t)
	s := newStream(t, nil)
	rdb := s.rdb
	_, err := createGroup(ctx, s, "g", "0")
	require.NoError(t, err)
	addN(t, s, 2)
	ghostRead(t, s, "g", "ghost", 2)
	lease, alive := s.ks.lease("g"), s.ks.alive("g")
	require.NoError(t, rdb.Set(ctx, lease, "theirs", time.Minute).Err())

	res, err := script.Run(ctx, rdb, reclaimScript, "reclaim", []string{lease, s.Key()}, "mine", "g", "me", 0, "0-0", 100)
	require.NoError(t, err)
	_, _, ok := parseClaim(res)
	assert.False(t, ok)
	res, err = script.Run(ctx, rdb, sweepScript, "sweep", []string{lease, s.Key(), alive}, "mine", "g", 1)
	require.NoError(t, err)
	assert.EqualValues(t, -1, res)
	assert.Equal(t, map[string]int64{"ghost": 2}, consumerPending(t, s, "g"))
}

// One reclaimer at a time per (stream, group).
func TestOneLeaseHolderPerStreamAndGroup(t *testing.T) {
	t.Parallel()
	ctx := testCtx(t)
	s := newStream(t, nil)
	a := newSink(t, s, "g")
	b := newSink(t, s, "g")
	heldA, err := a.keepAlive(ctx)
	require.NoError(t, err)
	heldB, err := b.keepAlive(ctx)
	require.NoError(t, err)
	assert.True(t, heldA != heldB, "exactly one sink holds the lease (a: %v, b: %v)", heldA, heldB)
	holder, err := s.rdb.Get(ctx, s.ks.lease("g")).Result()
	require.NoError(t, err)
	assert.Contains(t, []string{a.token, b.token}, holder)
}

// The lease is keyed by stream and group. Two streams whose groups share a
// name each get their own reclaimer (docs/ARCHITECTURE.md, failure
// modes: 13).
func TestSameGroupNameOnTwoStreamsReclaimsOnBoth(t *testing.T) {
	t.Parallel()
	tag := redistest.Name(t)
	first, err := NewStream(srv.Client(), tag, "jobs")
	require.NoError(t, err)
	second, err := NewStream(srv.Client(), tag, "other")
	require.NoError(t, err)
	const grace = 200 * time.Millisecond
	for _, s := range []*Stream{first, second} {
		_, err := createGroup(testCtx(t), s, "g", "0")
		require.NoError(t, err)
		addN(t, s, 1)
		ghostRead(t, s, "g", "ghost", 1)
	}
	for _, s := range []*Stream{first, second} {
		sink := newSink(t, s, "g", WithAckGracePeriod(grace))
		ev := recv(t, sink.Subscribe(), 5*time.Second)
		assert.True(t, ev.Reclaimed)
		require.NoError(t, sink.Ack(testCtx(t), ev))
	}
}

// Keep-alives carry Redis server time, never the process's clock
// (docs/ARCHITECTURE.md, failure modes: 7).
func TestKeepAliveUsesRedisTime(t *testing.T) {
	t.Parallel()
	ctx := testCtx(t)
	s := newStream(t, nil)
	sink := newSink(t, s, "g")
	seen, err := s.rdb.HGet(ctx, s.ks.alive("g"), sink.Consumer()).Int64()
	require.NoError(t, err)
	now, err := s.rdb.Time(ctx).Result()
	require.NoError(t, err)
	assert.InDelta(t, now.UnixMilli(), seen, float64(10*time.Second/time.Millisecond))
	ttl, err := s.rdb.PTTL(ctx, s.ks.alive("g")).Result()
	require.NoError(t, err)
	assert.Positive(t, ttl, "the keep-alive hash expires when every sink is gone")
}
