package streaming

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// With WithMembers, the unit's keep-alives say which consumers live: a
// consumer whose member stops keeping alive has its pending entries
// taken over by a live sink within about the TTL, long before the ack
// grace, and is removed from the group; a live member's consumer keeps
// its entries, and the sink writes no keep-alive of its own.
func TestSinkWithMembersTakesOverADeadMembersEntries(t *testing.T) {
	t.Parallel()
	ctx := testCtx(t)
	s := newStream(t, nil)
	alive := s.Key() + ":alive" // the unit's keep-alive hash, in the stream's slot
	now := func() int64 {
		tm, err := s.rdb.Time(ctx).Result()
		require.NoError(t, err)
		return tm.UnixMilli()
	}
	const ttl = 400 * time.Millisecond
	require.NoError(t, s.rdb.XGroupCreateMkStream(ctx, s.Key(), "g", "0").Err())
	ids := addN(t, s, 6)
	require.NoError(t, s.rdb.HSet(ctx, alive, "m:dead", now(), "m:live", now()).Err())
	dead := readAs(t, s, "g", "dead", 3)
	live := readAs(t, s, "g", "live", 3)
	require.Equal(t, ids, append(append([]string{}, dead...), live...))

	require.NoError(t, s.rdb.HSet(ctx, alive, "m:taker", now()).Err())
	taker := newSink(t, s, "g", WithConsumer("taker"), WithAckGracePeriod(time.Hour), WithMembers(alive, "m:", ttl))
	// The live member keeps alive; the dead one has stopped.
	stop := make(chan struct{})
	kept := make(chan struct{})
	go func() {
		defer close(kept)
		for {
			select {
			case <-stop:
				return
			case <-time.After(ttl / 4):
			}
			_ = s.rdb.HSet(ctx, alive, "m:live", now(), "m:taker", now()).Err()
		}
	}()
	defer func() { close(stop); <-kept }()

	start := time.Now()
	got := map[string]bool{}
	for len(got) < len(dead) {
		ev := recv(t, taker.Subscribe(), 5*time.Second)
		require.True(t, ev.Reclaimed, "%s delivered as new", ev.ID)
		got[ev.ID] = true
	}
	took := time.Since(start)
	for _, id := range dead {
		assert.True(t, got[id], "%s of the dead member not taken over", id)
	}
	assert.Less(t, took, ttl+time.Second, "taken over later than the TTL + 1s")
	cs, err := taker.Consumers(ctx)
	require.NoError(t, err)
	names := map[string]int64{}
	for _, c := range cs {
		names[c.Name] = c.Pending
	}
	assert.NotContains(t, names, "dead", "the dead member's consumer is still in the group")
	assert.EqualValues(t, len(live), names["live"], "a live member's entries were taken")
	n, err := s.rdb.Exists(ctx, s.ks.alive("g")).Result()
	require.NoError(t, err)
	assert.Zero(t, n, "a sink with members wrote a keep-alive of its own")
}

func TestWithMembersChecksItsArguments(t *testing.T) {
	t.Parallel()
	s := newStream(t, nil)
	for _, o := range []SinkOption{WithMembers("", "m:", time.Second), WithMembers("k", "m:", 0)} {
		_, err := NewSink(testCtx(t), s, "g", o)
		assert.ErrorIs(t, err, ErrInvalidOption)
	}
}
