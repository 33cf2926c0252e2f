// Package streaming is shepherd's transport: Redis Streams with an
// append-only Stream, an acknowledged consumer-group Sink and a fan-out
// Reader.
//
// A Stream appends entries. Each entry carries an event name, an optional
// topic and a payload. Every Redis key the package uses is built under a
// caller-provided hash tag, so all streams of one pool (and their sinks'
// bookkeeping keys) share one Redis Cluster slot.
//
// A Sink reads a stream through a consumer group and delivers each entry
// at least once. An entry that stays unacknowledged for longer than the ack
// grace period is reclaimed (XAUTOCLAIM) by a live consumer of the group and
// delivered again, so a consumer that dies never takes its entries with it.
// Consumers whose keep-alive has lapsed are deleted only once they own no
// pending entries: XGROUP DELCONSUMER on a consumer that still owns entries
// would drop them. One consumer per (stream, group) reclaims at a time,
// under a fenced lease.
//
// A Reader reads a stream without a group: every Reader sees every entry
// added after its start position.
//
// # Never lose, never spin
//
// Trimming is off unless asked for (WithMaxLen), because trimming drops
// entries whether or not anyone has read them. A Redis error in a read loop
// is logged and reported to the error hook, then retried with capped
// exponential backoff. A NOGROUP error (the stream or group vanished, for
// instance after a restart of a Redis without persistence) recreates the
// group and reports ErrGroupRecreated.
//
// # Closing
//
// Blocking reads run on a dedicated connection when the client is a
// *redis.Client; Close unblocks them with CLIENT UNBLOCK and returns at
// once. With other clients (Cluster, Ring) reads block for at most 100ms at
// a time, which bounds how long Close waits.
package streaming
