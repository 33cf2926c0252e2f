package streaming

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestReaderSeesEntriesAddedBeforeSubscribe(t *testing.T) {
	t.Parallel()
	ctx := testCtx(t)
	s := newStream(t, nil)
	addN(t, s, 2) // before the reader: StartAtNewest skips them
	r, err := NewReader(ctx, s, WithBlockDuration(10*time.Second))
	require.NoError(t, err)
	defer func() { require.NoError(t, r.Close(ctx)) }()
	ids := addN(t, s, 3) // after NewReader, before Subscribe
	evs := recvN(t, r.Subscribe(), 3, 5*time.Second)
	for i, ev := range evs {
		assert.Equal(t, ids[i], ev.ID)
	}
}

func TestReaderOnMissingStreamSeesFirstEntries(t *testing.T) {
	t.Parallel()
	ctx := testCtx(t)
	s := newStream(t, nil)
	r, err := NewReader(ctx, s)
	require.NoError(t, err)
	defer func() { require.NoError(t, r.Close(ctx)) }()
	ids := addN(t, s, 1)
	assert.Equal(t, ids[0], recv(t, r.Subscribe(), 5*time.Second).ID)
}

func TestReaderStartPositions(t *testing.T) {
	t.Parallel()
	ctx := testCtx(t)
	s := newStream(t, nil)
	ids := addN(t, s, 4)
	at := (&Event{ID: ids[2]}).Time()
	cases := map[string]struct {
		opt   ReadOption
		first int
	}{
		"oldest": {StartAtOldest(), 0},
		"after":  {StartAfter(ids[1]), 2},
		"time":   {StartAtTime(at), -1}, // some entry at or after at
		"epoch":  {StartAtTime(time.Time{}), 0},
	}
	for name, c := range cases {
		r, err := NewReader(ctx, s, c.opt)
		require.NoError(t, err, name)
		ev := recv(t, r.Subscribe(), 5*time.Second)
		if c.first >= 0 {
			assert.Equal(t, ids[c.first], ev.ID, name)
		} else {
			assert.False(t, ev.Time().Before(at), name)
			// Entries of at's millisecond are included: the first one
			// delivered is the first entry of that millisecond.
			for _, id := range ids {
				if (&Event{ID: id}).Time().Equal(at) {
					assert.Equal(t, id, ev.ID, name)
					break
				}
			}
		}
		require.NoError(t, r.Close(ctx))
	}
}

func TestReadersFanOut(t *testing.T) {
	t.Parallel()
	ctx := testCtx(t)
	s := newStream(t, nil)
	var readers []*Reader
	for i := 0; i < 3; i++ {
		r, err := NewReader(ctx, s, WithBlockDuration(200*time.Millisecond))
		require.NoError(t, err)
		readers = append(readers, r)
	}
	ids := addN(t, s, 10)
	for _, r := range readers {
		evs := recvN(t, r.Subscribe(), 10, 5*time.Second)
		for i, ev := range evs {
			assert.Equal(t, ids[i], ev.ID)
		}
		require.NoError(t, r.Close(ctx))
	}
}
