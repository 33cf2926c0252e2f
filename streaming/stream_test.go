package streaming

import (
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestAddKeepsOrderAndFields(t *testing.T) {
	t.Parallel()
	ctx := testCtx(t)
	s := newStream(t, nil)
	var ids []string
	for i, name := range []string{"start", "notify", "stop"} {
		opts := []AddOption{}
		if i == 1 {
			opts = append(opts, WithTopic("tenant-7"))
		}
		id, err := s.Add(ctx, name, []byte{byte(i)}, opts...)
		require.NoError(t, err)
		ids = append(ids, id)
	}
	r, err := NewReader(ctx, s, StartAtOldest())
	require.NoError(t, err)
	defer func() { require.NoError(t, r.Close(ctx)) }()
	evs := recvN(t, r.Subscribe(), 3, 5*time.Second)
	for i, ev := range evs {
		assert.Equal(t, ids[i], ev.ID)
		assert.Equal(t, "jobs", ev.Stream)
		assert.Equal(t, []byte{byte(i)}, ev.Payload)
		assert.False(t, ev.Reclaimed)
		assert.WithinDuration(t, time.Now(), ev.Time(), 5*time.Second, "Time comes from the entry ID")
	}
	assert.Equal(t, []string{"start", "notify", "stop"}, []string{evs[0].Event, evs[1].Event, evs[2].Event})
	assert.Equal(t, []string{"", "tenant-7", ""}, []string{evs[0].Topic, evs[1].Topic, evs[2].Topic})
}

func TestAddBatch(t *testing.T) {
	t.Parallel()
	ctx := testCtx(t)
	s := newStream(t, nil)
	entries := make([]Entry, 50)
	for i := range entries {
		entries[i] = Entry{Event: "e", Topic: "t" + string(rune('a'+i%3)), Payload: []byte{byte(i)}}
	}
	ids, err := s.AddBatch(ctx, entries)
	require.NoError(t, err)
	require.Len(t, ids, 50)
	for i := 1; i < len(ids); i++ {
		a, b := mustParse(t, ids[i-1]), mustParse(t, ids[i])
		assert.True(t, a[0] < b[0] || (a[0] == b[0] && a[1] < b[1]), "IDs increase in batch order: %s, %s", ids[i-1], ids[i])
	}
	n, err := s.Len(ctx)
	require.NoError(t, err)
	assert.EqualValues(t, 50, n)

	msgs, err := srv.Client().XRange(ctx, s.Key(), "-", "+").Result()
	require.NoError(t, err)
	for i, m := range msgs {
		ev := eventFromMessage(s.Name(), m)
		assert.Equal(t, entries[i].Topic, ev.Topic)
		assert.Equal(t, entries[i].Payload, ev.Payload)
	}

	ids, err = s.AddBatch(ctx, nil)
	require.NoError(t, err)
	assert.Empty(t, ids)
}

// mustParse turns an ID into a comparable pair.
func mustParse(t *testing.T, id string) [2]uint64 {
	ms, seq, ok := parseID(id)
	require.True(t, ok, id)
	return [2]uint64{ms, seq}
}

func TestOnlyIfExistsDoesNotCreate(t *testing.T) {
	t.Parallel()
	ctx := testCtx(t)
	s := newStream(t, nil)
	_, err := s.Add(ctx, "e", nil, OnlyIfExists())
	require.ErrorIs(t, err, ErrStreamNotFound)
	_, err = s.AddBatch(ctx, []Entry{{Event: "e"}}, OnlyIfExists())
	require.ErrorIs(t, err, ErrStreamNotFound)
	exists, err := srv.Client().Exists(ctx, s.Key()).Result()
	require.NoError(t, err)
	assert.Zero(t, exists, "a NOMKSTREAM add must not create the stream")

	_, err = s.Add(ctx, "e", nil)
	require.NoError(t, err)
	_, err = s.Add(ctx, "e", nil, OnlyIfExists())
	require.NoError(t, err)
}

func TestMaxLenTrimsOnlyWhenAsked(t *testing.T) {
	t.Parallel()
	ctx := testCtx(t)
	untrimmed := newStream(t, nil)
	trimmed := newStream(t, nil, WithMaxLen(10))
	for _, s := range []*Stream{untrimmed, trimmed} {
		entries := make([]Entry, 500)
		for i := range entries {
			entries[i] = Entry{Event: "e"}
		}
		_, err := s.AddBatch(ctx, entries)
		require.NoError(t, err)
	}
	n, err := untrimmed.Len(ctx)
	require.NoError(t, err)
	assert.EqualValues(t, 500, n, "no trimming by default")
	n, err = trimmed.Len(ctx)
	require.NoError(t, err)
	assert.Less(t, n, int64(500), "WithMaxLen trims (approximately)")
}

func TestRemoveAndDestroy(t *testing.T) {
	t.Parallel()
	ctx := testCtx(t)
	s := newStream(t, nil)
	ids, err := s.AddBatch(ctx, []Entry{{Event: "a"}, {Event: "b"}})
	require.NoError(t, err)
	n, err := s.Remove(ctx, ids[0], "1-1")
	require.NoError(t, err)
	assert.EqualValues(t, 1, n)
	n, err = s.Len(ctx)
	require.NoError(t, err)
	assert.EqualValues(t, 1, n)

	sink, err := NewSink(ctx, s, "g", fast()...)
	require.NoError(t, err)
	require.NoError(t, sink.Close(ctx))
	require.NoError(t, s.Destroy(ctx))
	space := s.ks.space.Pattern()
	left, err := srv.Client().Keys(ctx, space).Result()
	require.NoError(t, err)
	assert.Empty(t, left, "Destroy leaves no key of the stream or its groups")
	require.NoError(t, s.Destroy(ctx), "destroying a missing stream is fine")
}

func TestInvalidInput(t *testing.T) {
	t.Parallel()
	ctx := testCtx(t)
	rdb := srv.Client()
	_, err := NewStream(nil, "p", "s")
	assert.ErrorIs(t, err, ErrInvalidOption)
	_, err = NewStream(rdb, "", "s")
	assert.ErrorIs(t, err, ErrInvalidOption)
	_, err = NewStream(rdb, "a}b", "s")
	assert.ErrorIs(t, err, ErrInvalidOption)
	_, err = NewStream(rdb, "p", "")
	assert.ErrorIs(t, err, ErrInvalidOption)
	_, err = NewStream(rdb, "p", "s", WithMaxLen(-1))
	assert.ErrorIs(t, err, ErrInvalidOption)

	s := newStream(t, nil)
	_, err = s.Add(ctx, "", nil)
	assert.ErrorIs(t, err, ErrInvalidOption)
	_, err = s.AddBatch(ctx, []Entry{{Event: "ok"}, {}})
	assert.ErrorIs(t, err, ErrInvalidOption)
	n, err := s.Len(ctx)
	require.NoError(t, err)
	assert.Zero(t, n, "a rejected batch adds nothing")

	bad := map[string]SinkOption{
		"negative block":  WithBlockDuration(-time.Second),
		"zero block":      WithBlockDuration(0),
		"zero polled":     WithMaxPolled(0),
		"negative buffer": WithBufferSize(-1),
		"bad start id":    StartAfter("not-an-id"),
		"nil logger":      WithLogger(nil),
		"nil hook":        WithErrorHook(nil),
		"bad backoff":     WithBackoff(time.Second, time.Millisecond),
		"negative grace":  WithAckGracePeriod(-time.Second),
		"empty consumer":  WithConsumer(""),
		"nil option":      nil,
	}
	for name, o := range bad {
		_, err := NewSink(ctx, s, "g", o)
		assert.ErrorIs(t, err, ErrInvalidOption, name)
		if ro, ok := o.(ReadOption); ok {
			_, err = NewReader(ctx, s, ro)
			assert.ErrorIs(t, err, ErrInvalidOption, name)
		}
	}
	_, err = NewSink(ctx, s, "")
	assert.ErrorIs(t, err, ErrInvalidOption)
	_, err = NewSink(ctx, nil, "g")
	assert.ErrorIs(t, err, ErrInvalidOption)
	_, err = NewReader(ctx, nil)
	assert.ErrorIs(t, err, ErrInvalidOption)
	groups, err := rdb.XInfoGroups(ctx, s.Key()).Result()
	if err == nil {
		assert.Empty(t, groups, "rejected sinks leave no group behind")
	}
}

func TestKeysCarryTagAndStreamAndGroup(t *testing.T) {
	t.Parallel()
	a, err := NewStream(srv.Client(), "pool1", "a:b")
	require.NoError(t, err)
	b, err := NewStream(srv.Client(), "pool1", "a")
	require.NoError(t, err)
	assert.Equal(t, "shepherd:{pool1}:stream:a:b", a.Key())
	assert.NotEqual(t, a.ks.lease("c"), b.ks.lease("b:c"), "stream a:b/group c and stream a/group b:c differ")
	assert.NotEqual(t, a.ks.lease("g"), b.ks.lease("g"), "a lease is keyed by stream and group, not group alone")
	assert.Contains(t, a.ks.lease("g"), "{pool1}")
	assert.Contains(t, a.ks.alive("g"), "{pool1}")
	// All of one tag's keys share the hash tag, hence one Cluster slot.
	for _, k := range []string{a.Key(), b.Key(), a.ks.lease("g"), a.ks.alive("g")} {
		assert.True(t, strings.HasPrefix(k, "shepherd:{pool1}:"), k)
	}
}
