// Package replica asks Redis for replicated acknowledgement and watches
// for failovers.
//
// Redis replicates asynchronously: a master acknowledges a write before
// any replica has it, and a failover that promotes a replica which did
// not have it undoes the write. WAIT n timeout blocks the connection that
// sends it until n replicas acknowledged every write that connection sent
// before it (or the timeout passed) and says how many did. It counts one
// connection's writes and does not block inside a script, so Pipe sends
// it in the same pipeline, on the same connection, as the calls whose
// writes it confirms: a go-redis pipeline of a *redis.Client runs on one
// connection, and on a Redis Cluster Pipe sends it to the master of the
// calls' slot (a keyless WAIT would go to any node).
//
// WAIT is not consensus. Replicas that acknowledged hold the writes, but
// Redis (Sentinel, Cluster) may still promote a replica that did not:
// with one replica a master, or n equal to every replica, or
// min-replicas-to-write, the promoted replica is one that acknowledged.
//
// Watch reads the master's replication id and offset (INFO replication)
// and reports a change of id: a failover, or a restart that lost its
// history. The new master's master_replid2 and second_repl_offset say
// how far its history follows the old master's, so how much of what the
// old master had (as far as this process saw it) was lost.
package replica

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/redis/go-redis/v9"
)

// Ack is a level of replicated acknowledgement: N replicas within
// Timeout. N = 0 asks for none (Redis's own acknowledgement).
type Ack struct {
	N       int
	Timeout time.Duration
}

// On tells whether a asks for any replica.
func (a Ack) On() bool { return a.N > 0 }

// Validate returns an error for a level no call could meet: N < 0, or N >
// 0 with a Timeout that is not positive (WAIT 0 blocks until the replicas
// answer, however long).
func (a Ack) Validate() error {
	switch {
	case a.N < 0:
		return fmt.Errorf("replicas %d: must be 0 or more", a.N)
	case a.N > 0 && a.Timeout <= 0:
		return fmt.Errorf("replica timeout %v: must be positive", a.Timeout)
	case a.N > 0 && a.Timeout < time.Millisecond:
		return fmt.Errorf("replica timeout %v: WAIT counts whole milliseconds, at least 1ms", a.Timeout)
	}
	return nil
}

// Fits returns an error when a's timeout is not shorter than
// callTimeout, the bound of the calls that carry its WAIT: the call
// would end before the WAIT could.
func (a Ack) Fits(callTimeout time.Duration) error {
	if a.On() && a.Timeout >= callTimeout {
		return fmt.Errorf("replica timeout %v must be shorter than the call timeout %v", a.Timeout, callTimeout)
	}
	return nil
}

// Error says that fewer replicas than asked acknowledged a call's writes
// in time. The writes stand on the master; a failover may undo them.
type Error struct {
	Want, Got int
	Timeout   time.Duration
}

func (e *Error) Error() string {
	return fmt.Sprintf("%d of %d replicas acknowledged the writes within %v", e.Got, e.Want, e.Timeout)
}

// ErrNotReplicated is matched (errors.Is) by every *Error.
var ErrNotReplicated = errors.New("not replicated")

// Is makes errors.Is(err, ErrNotReplicated) true.
func (e *Error) Is(target error) bool { return target == ErrNotReplicated }

// Master returns the client that sends commands to the master serving
// key: rdb itself, or on a Redis Cluster the master of key's slot.
func Master(ctx context.Context, rdb redis.UniversalClient, key string) (redis.Cmdable, error) {
	if cc, ok := rdb.(*redis.ClusterClient); ok {
		return cc.MasterForKey(ctx, key)
	}
	return rdb, nil
}

// Pipe sends fill's commands and then, when a is on, WAIT a.N a.Timeout,
// in one pipeline on one connection to the master of key, and returns
// the pipeline's error (each command's own is in its Cmd) and the WAIT's
// command (nil when a is off). Check reads it.
func Pipe(ctx context.Context, rdb redis.UniversalClient, key string, a Ack, fill func(p redis.Pipeliner)) (*redis.Cmd, error) {
	c, err := Master(ctx, rdb, key)
	if err != nil {
		return nil, err
	}
	pipe := c.Pipeline()
	fill(pipe)
	var wait *redis.Cmd
	if a.On() {
		// Pipeliner has no Wait method; the command is the same.
		wait = pipe.Do(ctx, "wait", a.N, a.Timeout.Milliseconds())
	}
	_, err = pipe.Exec(ctx)
	return wait, err
}

// Check returns nil when wait (Pipe's) counted a.N replicas or more, an
// *Error when fewer, or wait's own error. A nil wait (a off) is nil.
func Check(wait *redis.Cmd, a Ack) error {
	if wait == nil {
		return nil
	}
	got, err := wait.Int64()
	if err != nil {
		return fmt.Errorf("WAIT: %w", err)
	}
	if int(got) < a.N {
		return &Error{Want: a.N, Got: int(got), Timeout: a.Timeout}
	}
	return nil
}

// Confirm makes sure that what fill's reads return is replicated: it
// sends fill's commands (reads), then a write of marker (a key of the
// unit's own, in the slot of what fill reads) and WAIT, on one
// connection to the master of marker. WAIT counts the writes of its
// connection: the marker's write comes after every write that the reads
// saw on this master, so n replicas holding it hold those too. It
// returns nil when a is off, after the reads alone. The marker is a
// small string that expires after a minute.
func Confirm(ctx context.Context, rdb redis.UniversalClient, marker string, a Ack, fill func(p redis.Pipeliner)) error {
	wait, err := Pipe(ctx, rdb, marker, a, func(p redis.Pipeliner) {
		fill(p)
		if a.On() {
			p.Set(ctx, marker, "1", time.Minute)
		}
	})
	if err != nil && !errors.Is(err, redis.Nil) {
		return err
	}
	return Check(wait, a)
}
