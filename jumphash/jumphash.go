package jumphash

import "github.com/cespare/xxhash/v2"

// multiplier is the 64-bit linear congruential generator constant used by
// the reference implementation; keeping it makes our buckets identical to
// every other faithful implementation, so keys map the same way in any
// language.
const multiplier = 2862933555777941757

// Hash returns the bucket in [0, buckets) that key maps to.
//
// Hash panics if buckets < 1: asking for a bucket out of no buckets is a
// programmer error, not a run-time condition. It is safe for concurrent use
// and allocates nothing.
func Hash(key uint64, buckets int) int {
	if buckets < 1 {
		panic("jumphash: buckets must be at least 1")
	}
	// The loop jumps forward through the bucket numbers at which this key
	// would move if buckets were added one by one; the last jump below
	// buckets is the answer. Each step draws a fresh pseudo-random number
	// from the key, so the expected number of jumps is ln(buckets).
	var b, j int64 = -1, 0
	for j < int64(buckets) {
		b = j
		key = key*multiplier + 1
		j = int64(float64(b+1) * (float64(int64(1)<<31) / float64((key>>33)+1)))
	}
	return int(b)
}

// HashString hashes key with xxhash (64-bit) and returns its bucket in
// [0, buckets) as Hash does. Like Hash it panics if buckets < 1.
func HashString(key string, buckets int) int {
	return Hash(xxhashString(key), buckets)
}

func xxhashString(key string) uint64 { return xxhash.Sum64String(key) }
