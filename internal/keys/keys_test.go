package keys

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func TestKeyLayout(t *testing.T) {
	s, err := New("orders")
	require.NoError(t, err)
	assert.Equal(t, "shepherd:{orders}:stream:jobs", s.Key(KindStream, "jobs"))
	assert.Equal(t, "shepherd:{orders}:map:a:b", s.Key(KindMap, "a:b"))
}

func TestNamesDoNotCollide(t *testing.T) {
	s, err := New("p")
	require.NoError(t, err)
	// A map called "x" and the revision counter of map "x" differ, whatever
	// the user calls their maps.
	assert.NotEqual(t, s.Key(KindMap, "x:rev"), s.Key(KindMapRev, "x"))
	assert.NotEqual(t, s.Key(KindMap, "rev:x"), s.Key(KindMapRev, "x"))
}

func TestInvalidTags(t *testing.T) {
	for _, tag := range []string{"", "a}b", "}"} {
		_, err := New(tag)
		assert.ErrorIs(t, err, ErrInvalidTag, "tag %q", tag)
	}
	s, err := New("a{b")
	require.NoError(t, err, "'{' inside a tag is harmless: the hash tag ends at the first '}'")
	assert.Equal(t, "shepherd:{a{b}:map:m", s.Key(KindMap, "m"))
}

func TestMisusePanics(t *testing.T) {
	assert.Panics(t, func() { Space{}.Key(KindMap, "m") })
	s, _ := New("p")
	assert.Panics(t, func() { s.Key("bad:kind", "m") })
	assert.Panics(t, func() { s.Key("", "m") })
}

func TestPatternEscapesGlobs(t *testing.T) {
	s, err := New("a*b?[c]")
	require.NoError(t, err)
	assert.Equal(t, `shepherd:{a\*b\?\[c\]}:*`, s.Pattern())
}

func TestKindPatternAndGlob(t *testing.T) {
	s, err := New("q*#1")
	require.NoError(t, err)
	assert.Equal(t, `shepherd:{q\*#1}:queue:*`, s.KindPattern(KindQueue))
	assert.Equal(t, `a\\b\]`, Glob(`a\b]`))
}

func TestGuard(t *testing.T) {
	s, err := New("orders:eu{1")
	require.NoError(t, err)
	g, ok := Guard(s.Key(KindQueue, "task:abc"))
	require.True(t, ok)
	assert.Equal(t, "shepherd:{orders:eu{1}:guard:slot", g, "the tag is the text up to the first }")
	assert.Equal(t, s.Key(KindGuard, "slot"), g)
	g2, ok := Guard(s.Key(KindPool, "settings"))
	require.True(t, ok)
	assert.Equal(t, g, g2, "one guard per tag, whatever the kind")
	for _, k := range []string{"", "other:{x}:y", "shepherd:{}:queue:x", "shepherd:{open"} {
		_, ok := Guard(k)
		assert.False(t, ok, "%q", k)
	}
}

// Slot is CLUSTER KEYSLOT's: the values Redis 7.0 gave for these keys.
func TestSlot(t *testing.T) {
	for key, slot := range map[string]int{
		"123456789":                          12739, // CRC16/XMODEM's check value 0x31C3
		"user1000":                           3443,
		"foo{user1000}{bar}":                 3443, // the first tag counts
		"foo{}{bar}":                         8363, // an empty tag: the whole key
		"shepherd:{orders#1}:queue:settings": 2120,
		"a":                                  15495,
	} {
		assert.Equal(t, slot, Slot(key), "%q", key)
	}
}
