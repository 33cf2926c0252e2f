package streaming

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// readAs reads up to n new entries of s as consumer of group, with a raw
// XREADGROUP: a consumer that then dies holding them.
func readAs(t *testing.T, s *Stream, group, consumer string, n int64) []string {
	t.Helper()
	res, err := s.rdb.XReadGroup(testCtx(t), &redis.XReadGroupArgs{
		Group: group, Consumer: consumer, Streams: []string{s.Key(), ">"}, Count: n, Block: -1,
	}).Result()
	require.NoError(t, err)
	var ids []string
	for _, m := range res[0].Messages {
		ids = append(ids, m.ID)
	}
	return ids
}

// A dead consumer's entries go to the taker at once, long before the ack
// grace period, are delivered as reclaimed, and the dead consumer is gone
// from the group; entries deleted from the stream meanwhile are not
// delivered. Several calls' worth of entries (more than maxPolled) all
// arrive.
func TestSinkTakeOver(t *testing.T) {
	t.Parallel()
	ctx := testCtx(t)
	s := newStream(t, nil)
	ids := addN(t, s, 11)
	// The dead consumer reads everything before the taker exists.
	require.NoError(t, s.rdb.XGroupCreate(ctx, s.Key(), "g", "0").Err())
	held := readAs(t, s, "g", "dead", 100)
	require.Equal(t, ids, held)
	taker := newSink(t, s, "g", WithAckGracePeriod(time.Hour), WithMaxPolled(4))
	_, err := s.Remove(ctx, held[0])
	require.NoError(t, err)

	n, err := taker.TakeOver(ctx, "dead")
	require.NoError(t, err)
	assert.Equal(t, len(held)-1, n)
	// The taker's read loop may also deliver what it now owns, once, as
	// it reads its own pending entries when it starts: at least once.
	reclaimed := map[string]bool{}
	for len(reclaimed) < len(held)-1 {
		ev := recv(t, taker.Subscribe(), 5*time.Second)
		require.NotEqual(t, held[0], ev.ID, "an entry deleted from the stream was delivered")
		if ev.Reclaimed {
			reclaimed[ev.ID] = true
		}
	}
	for _, id := range held[1:] {
		assert.True(t, reclaimed[id], "%s not taken over", id)
	}
	cs, err := taker.Consumers(ctx)
	require.NoError(t, err)
	for _, c := range cs {
		assert.NotEqual(t, "dead", c.Name, "the dead consumer is still in the group")
		assert.Equal(t, taker.Consumer(), c.Name)
		assert.EqualValues(t, len(held)-1, c.Pending)
	}

	again, err := taker.TakeOver(ctx, "dead")
	require.NoError(t, err, "taking over a consumer that is gone is a no-op")
	assert.Zero(t, again)
	_, err = taker.TakeOver(ctx, taker.Consumer())
	assert.ErrorIs(t, err, ErrInvalidOption)
	_, err = taker.TakeOver(ctx, "")
	assert.ErrorIs(t, err, ErrInvalidOption)
}

// Consumers and TakeOver on a group whose stream Redis lost are no error.
func TestSinkTakeOverMissingGroup(t *testing.T) {
	t.Parallel()
	ctx := testCtx(t)
	s := newStream(t, nil)
	sink := newSink(t, s, "g")
	require.NoError(t, s.rdb.Del(ctx, s.Key()).Err())
	n, err := sink.TakeOver(ctx, "someone")
	require.NoError(t, err)
	assert.Zero(t, n)
	// The sink recreates its group when it next reads (TakeOver waits for
	// that read): at most the sink's own consumer is there.
	cs, err := sink.Consumers(ctx)
	require.NoError(t, err)
	for _, c := range cs {
		assert.Equal(t, sink.Consumer(), c.Name)
	}
}

// A closing sink stops delivering what it takes over; the rest stays
// pending for it and nothing is lost.
func TestSinkTakeOverAfterClose(t *testing.T) {
	t.Parallel()
	ctx := testCtx(t)
	s := newStream(t, nil)
	other, err := NewSink(ctx, s, "g", fast()...)
	require.NoError(t, err)
	require.NoError(t, other.Close(context.Background()))
	for i := range 3 {
		_, err := s.Add(ctx, "job", []byte(fmt.Sprint(i)))
		require.NoError(t, err)
	}
	held := readAs(t, s, "g", "dead", 10)
	require.Len(t, held, 3)
	n, err := other.TakeOver(ctx, "dead")
	require.NoError(t, err)
	assert.Zero(t, n, "a closed sink delivers nothing")
	assert.EqualValues(t, 3, pendingCount(t, s, "g"), "the entries stay pending")
}
