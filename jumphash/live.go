package jumphash

// maxProbes bounds the jump-hash probes HashLive makes before it falls back
// to a scan; with half the buckets alive, 64 probes all missing has odds
// of 2^-64.
const maxProbes = 64

// HashLive returns the bucket in [0, buckets) that key maps to when only
// some buckets are alive, or -1 when live reports none alive.
//
// Jump hash can only add or remove buckets at the end. HashLive lifts that
// limit: a key whose bucket is dead probes again, with a key derived from
// its own, until it lands on a live bucket. The result is that
//
//   - killing a bucket moves only the keys that were on it, spread evenly
//     over the live buckets; no other key moves;
//   - reviving a dead bucket moves onto it exactly the keys it would have
//     had, and moves no key between two other buckets;
//   - adding a bucket at the end when none is dead moves about
//     1/(buckets+1) of the keys, all into the new bucket, as Hash does.
//
// So a pool keeps a table of worker slots whose size only grows, fills
// the lowest dead slot when a worker joins, and leaves a dead slot behind
// when one leaves: whichever worker leaves, the oldest as well as the
// newest, only its own keys move.
//
// Each probe costs one Hash; the expected number of probes is
// buckets/alive. live is called with buckets in [0, buckets) and must
// answer the same for the same bucket within one call. HashLive panics if
// buckets < 1.
func HashLive(key uint64, buckets int, live func(bucket int) bool) int {
	b := Hash(key, buckets)
	if live(b) {
		return b
	}
	probe := key
	for i := 0; i < maxProbes; i++ {
		// A SplitMix64 step derives each probe's key from the previous one,
		// so the sequence of probes is a fixed property of the key and does
		// not depend on which buckets are alive.
		probe += 0x9e3779b97f4a7c15
		z := probe
		z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9
		z = (z ^ (z >> 27)) * 0x94d049bb133111eb
		z ^= z >> 31
		if b = Hash(z, buckets); live(b) {
			return b
		}
	}
	// Nearly all buckets are dead: scan from the last probe so that the
	// answer is still a fixed function of the key and the live set.
	for i := 1; i <= buckets; i++ {
		if c := (b + i) % buckets; live(c) {
			return c
		}
	}
	return -1
}

// HashLiveString hashes key with xxhash and returns HashLive's bucket.
func HashLiveString(key string, buckets int, live func(bucket int) bool) int {
	return HashLive(xxhashString(key), buckets, live)
}
