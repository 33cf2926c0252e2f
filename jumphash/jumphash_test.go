package jumphash

import (
	"fmt"
	"math"
	"os"
	"strconv"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
	os.Exit(0) // not reached: VerifyTestMain exits
}

// referenceHash is the C++ loop printed in the paper, written out step by
// step with unsigned arithmetic exactly as C++ performs it. It is kept
// deliberately separate from Hash so that a slip in either shows up.
func referenceHash(key uint64, numBuckets int32) int32 {
	var b int64 = -1
	var j int64
	for j < int64(numBuckets) {
		b = j
		key = key*2862933555777941757 + 1
		numerator := float64(uint64(1) << 31)
		denominator := float64((key >> 33) + 1)
		j = int64(float64(b+1) * (numerator / denominator))
	}
	return int32(b)
}

func TestHashGoldenLiterals(t *testing.T) {
	t.Parallel()
	// Published outputs of independent implementations of the paper's
	// algorithm (ClickHouse's jumpConsistentHash test reference and the
	// test vectors of a TypeScript port).
	cases := []struct {
		key     uint64
		buckets int
		want    int
	}{
		{1, 1, 0},
		{42, 57, 43},
		{256, 1024, 520},
		{3735883980, 1, 0},
		{3735883980, 666, 361},
		{16045690984833335023, 255, 237},
		{10863919174838991, 11, 6},
		{2016238256797177309, 11, 3},
		{1673758223894951030, 11, 5},
	}
	for _, c := range cases {
		assert.Equal(t, c.want, Hash(c.key, c.buckets), "Hash(%d, %d)", c.key, c.buckets)
	}
}

func TestHashMatchesReferenceLoop(t *testing.T) {
	t.Parallel()
	bucketCounts := []int{1, 2, 3, 7, 8, 10, 64, 100, 1000, 1024, 65536, 1 << 20, math.MaxInt32}
	// An LCG walks keys across the whole 64-bit range, not just small ones.
	key := uint64(0x9e3779b97f4a7c15)
	for i := 0; i < 20000; i++ {
		key = key*6364136223846793005 + 1442695040888963407
		for _, n := range bucketCounts {
			want := int(referenceHash(key, int32(n)))
			if got := Hash(key, n); got != want {
				t.Fatalf("Hash(%d, %d) = %d, reference loop gives %d", key, n, got, want)
			}
		}
	}
}

func TestHashRange(t *testing.T) {
	t.Parallel()
	for n := 1; n <= 300; n++ {
		for k := uint64(0); k < 200; k++ {
			b := Hash(k*0x2545F4914F6CDD1D, n)
			if b < 0 || b >= n {
				t.Fatalf("Hash(%d, %d) = %d, out of [0, %d)", k, n, b, n)
			}
		}
	}
}

func TestHashPanicsOnNoBuckets(t *testing.T) {
	t.Parallel()
	for _, n := range []int{0, -1, math.MinInt} {
		assert.PanicsWithValue(t, "jumphash: buckets must be at least 1", func() { Hash(1, n) }, "buckets=%d", n)
		assert.Panics(t, func() { HashString("k", n) }, "buckets=%d", n)
	}
}

func TestHashStringIsHashOfXXHash(t *testing.T) {
	t.Parallel()
	// xxhash64("") with seed 0 is the published constant 0xef46db3751d8e999.
	assert.Equal(t, Hash(0xef46db3751d8e999, 1000), HashString("", 1000))
	for i := 0; i < 1000; i++ {
		b := HashString("tenant-"+strconv.Itoa(i), 17)
		require.GreaterOrEqual(t, b, 0)
		require.Less(t, b, 17)
	}
}

func TestBalance(t *testing.T) {
	t.Parallel()
	const keys = 1_000_000
	for _, n := range []int{10, 100} {
		t.Run(fmt.Sprintf("buckets=%d", n), func(t *testing.T) {
			t.Parallel()
			counts := make([]int, n)
			for i := 0; i < keys; i++ {
				counts[HashString("key-"+strconv.Itoa(i), n)]++
			}
			want := float64(keys) / float64(n)
			for b, c := range counts {
				dev := math.Abs(float64(c)-want) / want
				// 1M keys over 100 buckets gives 10,000 per bucket, whose
				// binomial standard deviation is about 1%: allow the
				// issue's 1% for 10 buckets and 5 sigma for 100.
				limit := 0.01
				if n == 100 {
					limit = 0.05
				}
				assert.LessOrEqual(t, dev, limit, "bucket %d holds %d keys, want about %.0f", b, c, want)
			}
			// The total deviation must still be within 1% of uniform.
			var sumDev float64
			for _, c := range counts {
				sumDev += math.Abs(float64(c) - want)
			}
			assert.LessOrEqual(t, sumDev/float64(keys), 0.01, "mean absolute deviation from uniform")
		})
	}
}

func TestMinimalMovement(t *testing.T) {
	t.Parallel()
	const keys = 200_000
	for _, n := range []int{1, 2, 5, 9, 10, 63, 100} {
		moved := 0
		for i := 0; i < keys; i++ {
			k := "job-" + strconv.Itoa(i)
			before, after := HashString(k, n), HashString(k, n+1)
			if before != after {
				require.Equal(t, n, after, "key %q moved from %d to %d when growing %d→%d; only moves into the new bucket are allowed", k, before, after, n, n+1)
				moved++
			}
		}
		frac := float64(moved) / keys
		want := 1 / float64(n+1)
		assert.InDelta(t, want, frac, want*0.05, "growing %d→%d moved %.4f of keys, want about %.4f", n, n+1, frac, want)
	}
}

var sink int

func benchmarkHash(b *testing.B, buckets int) {
	key := uint64(0x9e3779b97f4a7c15)
	for i := 0; i < b.N; i++ {
		key = key*6364136223846793005 + 1442695040888963407
		sink += Hash(key, buckets)
	}
}

func BenchmarkHash8(b *testing.B)    { benchmarkHash(b, 8) }
func BenchmarkHash64(b *testing.B)   { benchmarkHash(b, 64) }
func BenchmarkHash1024(b *testing.B) { benchmarkHash(b, 1024) }

func BenchmarkHashString1024(b *testing.B) {
	keys := make([]string, 1024)
	for i := range keys {
		keys[i] = "tenant-" + strconv.Itoa(i)
	}
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		sink += HashString(keys[i&1023], 1024)
	}
}
