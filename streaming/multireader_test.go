package streaming

import (
	"testing"
	"time"

	"github.com/shepherd-go/shepherd/internal/redistest"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestMultiReaderFollowsAChangingSetOfStreams(t *testing.T) {
	t.Parallel()
	ctx := testCtx(t)
	tag := redistest.Name(t)
	a, err := NewStream(srv.Client(), tag, "a")
	require.NoError(t, err)
	b, err := NewStream(srv.Client(), tag, "b")
	require.NoError(t, err)
	_, err = a.Add(ctx, "before", nil)
	require.NoError(t, err)

	// A long block: Add must interrupt it rather than wait it out.
	r, err := NewMultiReader(srv.Client(), WithBlockDuration(10*time.Second))
	require.NoError(t, err)
	defer r.Close(ctx)
	require.NoError(t, r.Add(ctx, a))
	require.NoError(t, r.Add(ctx, a), "adding twice is a no-op")
	_, err = a.Add(ctx, "a1", nil)
	require.NoError(t, err)
	ev := recv(t, r.Subscribe(), time.Second)
	assert.Equal(t, "a1", ev.Event, "entries before Add are not delivered")
	assert.Equal(t, "a", ev.Stream)

	start := time.Now()
	require.NoError(t, r.Add(ctx, b))
	assert.Less(t, time.Since(start), 2*time.Second, "Add interrupts the blocked read")
	_, err = b.Add(ctx, "b1", nil)
	require.NoError(t, err)
	_, err = a.Add(ctx, "a2", nil)
	require.NoError(t, err)
	got := map[string]string{}
	for _, ev := range recvN(t, r.Subscribe(), 2, 2*time.Second) {
		got[ev.Stream] = ev.Event
	}
	assert.Equal(t, map[string]string{"a": "a2", "b": "b1"}, got)

	require.NoError(t, r.Remove(ctx, a))
	_, err = a.Add(ctx, "a3", nil)
	require.NoError(t, err)
	_, err = b.Add(ctx, "b2", nil)
	require.NoError(t, err)
	ev = recv(t, r.Subscribe(), 2*time.Second)
	assert.Equal(t, "b2", ev.Event, "a removed stream is not read")

	require.NoError(t, r.Remove(ctx, b))
	start = time.Now()
	require.NoError(t, r.Close(ctx))
	assert.Less(t, time.Since(start), 500*time.Millisecond, "Close of an idle multi reader is prompt")
	_, open := <-r.Subscribe()
	assert.False(t, open)
}

func TestMultiReaderRemoveAndCloseWithAClosedClient(t *testing.T) {
	t.Parallel()
	ctx := testCtx(t)
	rdb := srv.NewClient()
	s, err := NewStream(rdb, redistest.Name(t), "s")
	require.NoError(t, err)
	r, err := NewMultiReader(rdb, WithBlockDuration(10*time.Second), WithBackoff(time.Millisecond, 10*time.Millisecond))
	require.NoError(t, err)
	require.NoError(t, r.Add(ctx, s))
	require.NoError(t, rdb.Close())
	start := time.Now()
	require.NoError(t, r.Remove(ctx, s))
	require.NoError(t, r.Close(ctx))
	assert.Less(t, time.Since(start), 2*time.Second, "Remove and Close must not wait on a dead client")
}

func TestMultiReaderAddFromStartDeliversWhatTheStreamHolds(t *testing.T) {
	t.Parallel()
	ctx := testCtx(t)
	s, err := NewStream(srv.Client(), redistest.Name(t), "s")
	require.NoError(t, err)
	for _, e := range []string{"e1", "e2"} {
		_, err = s.Add(ctx, e, nil)
		require.NoError(t, err)
	}
	r, err := NewMultiReader(srv.Client(), WithBlockDuration(time.Second))
	require.NoError(t, err)
	defer r.Close(ctx)
	require.NoError(t, r.AddFromStart(ctx, s))
	_, err = s.Add(ctx, "e3", nil)
	require.NoError(t, err)
	var got []string
	for _, ev := range recvN(t, r.Subscribe(), 3, 2*time.Second) {
		got = append(got, ev.Event)
	}
	assert.Equal(t, []string{"e1", "e2", "e3"}, got)
	require.ErrorIs(t, r.AddFromStart(ctx, nil), ErrInvalidOption)
}
