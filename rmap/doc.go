// Package rmap provides replicated maps: a Redis hash mirrored in every
// process that joins it, with atomic writes and change notifications.
//
// The pool keeps the state every process must see at once in such maps:
// the worker registry, the slot table and the shutdown flag. (Job records
// are not in rmap: they are edited by the pool's own scripts.) A stale replica
// would run a job twice or never, so the package is built around one rule:
// the local copy is either exactly some revision of the map in Redis, or
// it is being reloaded.
//
// # Reads and writes
//
// Reads (Get, GetValues, Keys, Len, Map, Rev) are served from the local
// copy under a read lock and never touch Redis. Writes (Set,
// SetIfNotExists, SetIfExists, TestAndSet, Delete, TestAndDelete, Inc,
// AppendValues, AppendUniqueValues, RemoveValues, Reset, Destroy) are one
// Lua script each: it checks the condition, updates the hash, increments
// the map's revision and publishes the change, atomically. Each returns what the
// caller needs to act on the outcome (the previous value, whether a
// condition held, a count), decided by Redis, never by the local copy: use
// the conditional writes, not a Get followed by a Set, to decide ownership.
//
// Read your writes: when a write returns nil, the local copy reflects it
// (and every write committed before it). If other processes wrote at the
// same time, the write waits, bounded by its ctx, for their changes to
// arrive; an error wrapping ErrUnsynced then means the write was committed
// but the copy had not caught up. Sync waits for other processes' writes.
// As with any Redis client, a write that fails with a network or timeout
// error may still have been committed; the conditional writes make a retry
// safe, and the copy converges to whatever Redis holds.
//
// # Staying correct
//
// Every change carries the map's revision and incarnation (epoch). The
// copy applies a change only if it directly follows its revision; older
// ones are ignored and a gap causes a reload: one script that returns the
// hash and its revision together, a consistent snapshot. The copy also
// reloads when go-redis resubscribes after a reconnect (a new subscription
// confirmation), when pub/sub fails, and when the periodic revision check
// (WithCheckInterval) finds that a message was lost. Redis losing the map
// (a restart without persistence, Destroy) starts a new epoch, which every
// copy notices. So a copy is never stale for longer than one reconnect and
// one reload, or one check interval.
//
// # Keys and values
//
// Any non-empty string is a valid key, and any string a value, both up to
// WithMaxValueSize bytes (1 MiB by default). List values (AppendValues and
// friends) are stored in one hash field as length-prefixed items; see
// EncodeValues. The map's Redis keys share the hash tag given by
// WithHashTag (the map's name by default), so a pool's maps live in one
// Redis Cluster slot and never collide with another pool's.
//
// # Cost
//
// A write is one round trip plus the message to every replica; a read is a
// map lookup under a lock. Measured with go test -bench on the project's
// 2-core CI machine (loopback Redis 7, shared with other jobs, so take the
// figures as rough): Set about 13,000 ops/s from one goroutine (0.45x a
// bare HSET), 10,000 with two other replicas following; Get about 35 ns
// (65 ns with both cores reading); a write seen on another replica
// 80 µs after it was issued at the median, 210 µs at p99. A reload moves the whole map, so keep maps
// modest (thousands of entries, not millions). Each Map holds one pub/sub
// connection and one goroutine; each Subscribe adds one goroutine.
package rmap
