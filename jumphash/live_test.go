package jumphash

import (
	"math"
	"math/rand"
	"strconv"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// liveSet is a set of live buckets.
type liveSet map[int]bool

func (s liveSet) fn() func(int) bool { return func(b int) bool { return s[b] } }

func allLive(n int) liveSet {
	s := liveSet{}
	for i := 0; i < n; i++ {
		s[i] = true
	}
	return s
}

func assign(keys []string, n int, live liveSet) []int {
	out := make([]int, len(keys))
	for i, k := range keys {
		out[i] = HashLiveString(k, n, live.fn())
	}
	return out
}

func testKeys(n int) []string {
	keys := make([]string, n)
	for i := range keys {
		keys[i] = "tenant-" + strconv.Itoa(i)
	}
	return keys
}

func TestHashLiveEqualsHashWhenAllAlive(t *testing.T) {
	t.Parallel()
	for _, n := range []int{1, 2, 7, 64} {
		live := allLive(n)
		for i := 0; i < 5000; i++ {
			k := "k" + strconv.Itoa(i)
			require.Equal(t, HashString(k, n), HashLiveString(k, n, live.fn()))
		}
	}
}

func TestHashLiveOnlyReturnsLiveBuckets(t *testing.T) {
	t.Parallel()
	live := liveSet{3: true, 17: true}
	for i := 0; i < 5000; i++ {
		b := HashLive(uint64(i)*0x9E3779B97F4A7C15, 20, live.fn())
		require.True(t, live[b], "bucket %d is dead", b)
	}
	assert.Equal(t, -1, HashLive(42, 20, liveSet{}.fn()), "no live bucket")
	assert.Panics(t, func() { HashLive(1, 0, live.fn()) })
}

// Killing any bucket, the oldest (0) as well as the newest, moves only the
// keys that were on it.
func TestHashLiveRemovalMovesOnlyTheLeaversKeys(t *testing.T) {
	t.Parallel()
	const n = 10
	keys := testKeys(100_000)
	for _, dead := range []int{0, 4, n - 1} {
		live := allLive(n)
		before := assign(keys, n, live)
		delete(live, dead)
		after := assign(keys, n, live)
		moved, own := 0, 0
		gained := map[int]int{}
		for i := range keys {
			if before[i] == dead {
				own++
			}
			if before[i] != after[i] {
				require.Equal(t, dead, before[i], "key %q moved from live bucket %d", keys[i], before[i])
				moved++
				gained[after[i]]++
			}
		}
		assert.Equal(t, own, moved, "all of the leaver's keys move")
		// They spread evenly over the 9 survivors.
		for b, g := range gained {
			assert.InDelta(t, float64(own)/(n-1), g, float64(own)/(n-1)*0.15, "bucket %d gained %d", b, g)
		}
		assert.Len(t, gained, n-1)
	}
}

// Reviving a dead bucket (a worker joining into a free slot) moves keys
// only onto it, and gives it its fair share.
func TestHashLiveRevivalMovesKeysOnlyOntoTheJoiner(t *testing.T) {
	t.Parallel()
	const n = 12
	keys := testKeys(100_000)
	live := allLive(n)
	delete(live, 2)
	delete(live, 7)
	before := assign(keys, n, live)
	live[7] = true
	after := assign(keys, n, live)
	onto := 0
	for i := range keys {
		if before[i] != after[i] {
			require.Equal(t, 7, after[i], "key %q moved %d→%d, not onto the joiner", keys[i], before[i], after[i])
			onto++
		}
	}
	want := float64(len(keys)) / float64(n-1)
	assert.InDelta(t, want, float64(onto), want*0.05, "the joiner gets about 1/live of the keys")
}

func TestHashLiveGrowthWithHoles(t *testing.T) {
	t.Parallel()
	keys := testKeys(50_000)
	live := allLive(8)
	delete(live, 3)
	before := assign(keys, 8, live)
	live[8] = true
	after := assign(keys, 9, live)
	for i := range keys {
		if before[i] != after[i] {
			require.Equal(t, 8, after[i], "growing the table moves keys only into the new bucket")
		}
	}
}

func TestHashLiveBalanceWithHoles(t *testing.T) {
	t.Parallel()
	const n = 20
	rng := rand.New(rand.NewSource(1))
	live := liveSet{}
	for len(live) < 8 {
		live[rng.Intn(n)] = true
	}
	keys := testKeys(200_000)
	counts := map[int]int{}
	for _, b := range assign(keys, n, live) {
		counts[b]++
	}
	want := float64(len(keys)) / float64(len(live))
	for b, c := range counts {
		assert.LessOrEqual(t, math.Abs(float64(c)-want)/want, 0.03, "bucket %d has %d keys, want about %.0f", b, c, want)
	}
}

func TestHashLiveWithNearlyAllDead(t *testing.T) {
	t.Parallel()
	// One live bucket out of 1<<20: the probes almost surely miss and the
	// scan finds it.
	live := liveSet{123456: true}
	for i := 0; i < 20; i++ {
		assert.Equal(t, 123456, HashLive(uint64(i), 1<<20, live.fn()))
	}
}

func BenchmarkHashLiveHalfDead(b *testing.B) {
	live := func(bucket int) bool { return bucket%2 == 0 }
	key := uint64(0x9e3779b97f4a7c15)
	for i := 0; i < b.N; i++ {
		key = key*6364136223846793005 + 1442695040888963407
		sink += HashLive(key, 64, live)
	}
}
