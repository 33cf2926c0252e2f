package rmap

import (
	"fmt"
	"testing"
	"time"

	"github.com/shepherd-go/shepherd/internal/redistest"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestConditionalWrites(t *testing.T) {
	t.Parallel()
	ctx := testCtx(t)
	m := join(t, srv.NewClient(), redistest.Name(t))

	r, err := m.SetIfNotExists(ctx, "owner", "w1")
	require.NoError(t, err)
	assert.True(t, r.Applied)
	r, err = m.SetIfNotExists(ctx, "owner", "w2")
	require.NoError(t, err)
	assert.Equal(t, Result{Applied: false, Prev: "w1", Existed: true, Rev: 1}, r)

	r, err = m.TestAndSet(ctx, "owner", "w2", "w3")
	require.NoError(t, err)
	assert.False(t, r.Applied)
	assert.Equal(t, "w1", r.Prev)
	r, err = m.TestAndSet(ctx, "owner", "w1", "w3")
	require.NoError(t, err)
	assert.True(t, r.Applied)
	assert.Equal(t, "w1", r.Prev)
	v, _ := m.Get("owner")
	assert.Equal(t, "w3", v)

	r, err = m.SetIfExists(ctx, "owner", "w3")
	require.NoError(t, err)
	assert.Equal(t, Result{Applied: true, Prev: "w3", Existed: true, Rev: 3}, r)
	r, err = m.SetIfExists(ctx, "gone", "alive")
	require.NoError(t, err)
	assert.Equal(t, Result{Rev: 3}, r, "a refresh never creates")
	_, ok := m.Get("gone")
	assert.False(t, ok)

	// TestAndSet never creates: a missing key is not "".
	r, err = m.TestAndSet(ctx, "missing", "", "x")
	require.NoError(t, err)
	assert.False(t, r.Applied)
	assert.False(t, r.Existed)

	r, err = m.TestAndDelete(ctx, "owner", "w1")
	require.NoError(t, err)
	assert.False(t, r.Applied)
	assert.Equal(t, "w3", r.Prev)
	r, err = m.TestAndDelete(ctx, "owner", "w3")
	require.NoError(t, err)
	assert.True(t, r.Applied)
	_, ok = m.Get("owner")
	assert.False(t, ok)

	r, err = m.Delete(ctx, "owner")
	require.NoError(t, err)
	assert.False(t, r.Applied)
	assert.False(t, r.Existed)
	_, err = m.Set(ctx, "x", "1")
	require.NoError(t, err)
	r, err = m.Delete(ctx, "x")
	require.NoError(t, err)
	assert.Equal(t, Result{Applied: true, Prev: "1", Existed: true, Rev: 6}, r)
	requireConverged(t, srv.Client(), m)
}

func TestInc(t *testing.T) {
	t.Parallel()
	ctx := testCtx(t)
	m := join(t, srv.NewClient(), redistest.Name(t))
	n, err := m.Inc(ctx, "n", 5)
	require.NoError(t, err)
	assert.EqualValues(t, 5, n)
	n, err = m.Inc(ctx, "n", -7)
	require.NoError(t, err)
	assert.EqualValues(t, -2, n)
	v, _ := m.Get("n")
	assert.Equal(t, "-2", v)

	_, err = m.Set(ctx, "big", "9223372036854775806")
	require.NoError(t, err)
	n, err = m.Inc(ctx, "big", 1)
	require.NoError(t, err)
	assert.EqualValues(t, int64(9223372036854775807), n, "no float rounding")
	rev := m.Rev()
	_, err = m.Inc(ctx, "big", 1)
	assert.ErrorIs(t, err, ErrNotInteger)
	_, err = m.Set(ctx, "s", "abc")
	require.NoError(t, err)
	_, err = m.Inc(ctx, "s", 1)
	assert.ErrorIs(t, err, ErrNotInteger)
	assert.Equal(t, rev+1, m.Rev(), "a failed Inc writes nothing")
}

func TestListValues(t *testing.T) {
	t.Parallel()
	ctx := testCtx(t)
	name := redistest.Name(t)
	m := join(t, srv.NewClient(), name)
	other := join(t, srv.NewClient(), name)

	n, err := m.AppendValues(ctx, "w1", "job:a", "", "job:a")
	require.NoError(t, err)
	assert.Equal(t, 3, n)
	vals, err := m.GetValues("w1")
	require.NoError(t, err)
	assert.Equal(t, []string{"job:a", "", "job:a"}, vals)

	added, err := m.AppendUniqueValues(ctx, "w1", "job:a", "job:b", "job:b", "3:x")
	require.NoError(t, err)
	assert.Equal(t, 2, added)
	rev := m.Rev()
	added, err = m.AppendUniqueValues(ctx, "w1", "job:b")
	require.NoError(t, err)
	assert.Equal(t, 0, added)
	assert.Equal(t, rev, m.Rev(), "nothing to add writes nothing")

	removed, err := m.RemoveValues(ctx, "w1", "job:a", "nope")
	require.NoError(t, err)
	assert.Equal(t, 2, removed)
	require.NoError(t, other.Sync(ctx))
	vals, err = other.GetValues("w1")
	require.NoError(t, err)
	assert.Equal(t, []string{"", "job:b", "3:x"}, vals)

	removed, err = m.RemoveValues(ctx, "w1", "", "job:b", "3:x")
	require.NoError(t, err)
	assert.Equal(t, 3, removed)
	_, ok := m.Get("w1")
	assert.False(t, ok, "an emptied list is deleted")
	vals, err = m.GetValues("w1")
	require.NoError(t, err)
	assert.Nil(t, vals)

	_, err = m.Set(ctx, "plain", "hello")
	require.NoError(t, err)
	_, err = m.AppendValues(ctx, "plain", "x")
	assert.ErrorIs(t, err, ErrNotList)
	_, err = m.RemoveValues(ctx, "plain", "x")
	assert.ErrorIs(t, err, ErrNotList)
	_, err = m.GetValues("plain")
	assert.ErrorIs(t, err, ErrNotList)

	// A whole list can be swapped with TestAndSet.
	_, err = m.AppendValues(ctx, "w2", "a")
	require.NoError(t, err)
	r, err := m.TestAndSet(ctx, "w2", EncodeValues("a"), EncodeValues("a", "b"))
	require.NoError(t, err)
	assert.True(t, r.Applied)
	vals, _ = m.GetValues("w2")
	assert.Equal(t, []string{"a", "b"}, vals)
	requireConverged(t, srv.Client(), m, other)
}

func TestEncodeDecodeValues(t *testing.T) {
	t.Parallel()
	for _, vals := range [][]string{nil, {""}, {"a"}, {"", ""}, {"1:a", "::", "12345678901"}} {
		got, err := DecodeValues(EncodeValues(vals...))
		require.NoError(t, err)
		assert.Equal(t, len(vals), len(got))
		for i := range vals {
			assert.Equal(t, vals[i], got[i])
		}
	}
	for _, bad := range []string{"a", "1:", "x:a", ":a", "2:a", "-1:a", "99999999999999999999:a"} {
		_, err := DecodeValues(bad)
		assert.ErrorIs(t, err, ErrNotList, "%q", bad)
	}
}

func TestResetAndDestroy(t *testing.T) {
	t.Parallel()
	ctx := testCtx(t)
	name := redistest.Name(t)
	a := join(t, srv.NewClient(), name)
	b := join(t, srv.NewClient(), name)
	for i := range 5 {
		_, err := a.Set(ctx, fmt.Sprint(i), "v")
		require.NoError(t, err)
	}
	n, err := a.Reset(ctx)
	require.NoError(t, err)
	assert.Equal(t, 5, n)
	assert.Zero(t, a.Len())
	n, err = a.Reset(ctx)
	require.NoError(t, err)
	assert.Zero(t, n)
	_, err = b.Set(ctx, "after-reset", "v")
	require.NoError(t, err)
	requireConverged(t, srv.Client(), a, b)

	n, err = b.Destroy(ctx)
	require.NoError(t, err)
	assert.Equal(t, 1, n)
	_, err = b.Set(ctx, "x", "y")
	assert.ErrorIs(t, err, ErrClosed, "Destroy closes the map")
	assert.Zero(t, b.Len(), "Destroy empties its own copy")
	exists, err := srv.Client().Exists(ctx, a.keys[0], a.keys[1]).Result()
	require.NoError(t, err)
	assert.Zero(t, exists, "Destroy deletes every key of the map")
	require.Eventually(t, func() bool { return a.Len() == 0 && a.Rev() == 0 }, 5*time.Second, time.Millisecond)

	// A later write starts a new incarnation that replicas follow.
	c := join(t, srv.NewClient(), name)
	_, err = a.Set(ctx, "reborn", "1")
	require.NoError(t, err)
	require.NoError(t, c.Sync(ctx))
	v, _ := c.Get("reborn")
	assert.Equal(t, "1", v)
	assert.EqualValues(t, 1, c.Rev())
}
