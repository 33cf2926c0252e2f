package streaming

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/shepherd-go/shepherd/internal/redisutil"
)

// blocker runs one loop's blocking reads (XREAD/XREADGROUP ... BLOCK) so
// that Close can interrupt them.
//
// go-redis does not apply context cancellation to socket reads unless the
// client was built with ContextTimeoutEnabled, so cancelling a context
// cannot end a read blocked in Redis. When the client is a *redis.Client,
// reads run on a dedicated connection whose CLIENT ID is known, and unblock
// sends CLIENT UNBLOCK for it from the shared pool. Other clients (Cluster,
// Ring) read on the shared client with blocks capped at fallbackBlock.
//
// When the Redis user may not run CLIENT ID or CLIENT UNBLOCK (an ACL
// without them), reads fall back to capped blocks on the shared client
// too, with one warning.
//
// cmd and reset belong to the reading goroutine; unblock and close may be
// called from any goroutine.
type blocker struct {
	rdb    redis.UniversalClient
	client *redis.Client // nil: no dedicated connection possible
	rep    reporter

	mu        sync.Mutex
	conn      *redis.Conn
	id        int64 // CLIENT ID of conn; 0 when there is none
	noUnblock bool  // the Redis user may not run CLIENT ID or CLIENT UNBLOCK
}

func newBlocker(rdb redis.UniversalClient, rep reporter) *blocker {
	b := &blocker{rdb: rdb, rep: rep}
	b.client, _ = rdb.(*redis.Client)
	return b
}

// cmd returns where to send the next blocking read and how long it may
// block given the wanted duration.
func (b *blocker) cmd(ctx context.Context, block time.Duration) (redis.Cmdable, time.Duration, error) {
	b.mu.Lock()
	conn, fallback := b.conn, b.client == nil || b.noUnblock
	b.mu.Unlock()
	if fallback {
		if conn != nil {
			_ = b.reset() // a dedicated connection is no use without CLIENT UNBLOCK
		}
		return b.rdb, min(block, fallbackBlock), nil
	}
	if conn != nil {
		return conn, block, nil
	}
	// Let the client's own pool open (and initialise) a connection first:
	// go-redis v9.22 writes its shared options during a connection's
	// handshake, under a lock a dedicated Conn does not share, so a Conn's
	// first handshake racing the pool's first one is a data race.
	if err := b.client.Ping(ctx).Err(); err != nil {
		return nil, 0, fmt.Errorf("dedicated connection: %w", err)
	}
	conn = b.client.Conn()
	id, err := conn.ClientID(ctx).Result()
	if err == nil {
		// Unblocking a connection that is not blocked is a no-op: this
		// only asks whether the user may.
		err = b.rdb.ClientUnblock(ctx, id).Err()
	}
	if isNoPerm(err) {
		b.fallBack(err)
		return b.rdb, min(block, fallbackBlock), closeConn(conn)
	}
	if err != nil {
		return nil, 0, errors.Join(fmt.Errorf("dedicated connection: %w", err), closeConn(conn))
	}
	b.mu.Lock()
	b.conn, b.id = conn, id
	b.mu.Unlock()
	return conn, block, nil
}

// fallBack switches to short blocking reads on the shared client, as for
// Cluster clients: the Redis user may not run CLIENT ID or CLIENT UNBLOCK
// (an ACL without +client|id +client|unblock), so a blocked read could
// not be ended early. It warns once per client.
func (b *blocker) fallBack(err error) {
	b.mu.Lock()
	b.noUnblock = true
	b.mu.Unlock()
	if _, warned := noUnblockWarned.LoadOrStore(b.rdb, true); !warned {
		b.rep.logger.Warn("streaming: the Redis user may not run CLIENT ID or CLIENT UNBLOCK; blocking reads are capped at "+
			fallbackBlock.String()+" instead (more round trips when idle); grant +client|id +client|unblock to avoid it",
			append([]any{slog.Any("error", err)}, b.rep.attrs...)...)
	}
}

// noUnblockWarned holds the clients whose user was found to lack CLIENT
// UNBLOCK, so that a process warns once per client, not once per reader.
var noUnblockWarned sync.Map

// isNoPerm reports Redis's refusal of a command to the connection's ACL
// user.
func isNoPerm(err error) bool {
	return redisutil.HasErrorCode(err, "NOPERM")
}

// reset drops the dedicated connection after an error: a go-redis Conn
// whose connection broke stays broken, and a new one has a new CLIENT ID.
func (b *blocker) reset() error {
	b.mu.Lock()
	conn := b.conn
	b.conn, b.id = nil, 0
	b.mu.Unlock()
	if conn == nil {
		return nil
	}
	return closeConn(conn)
}

// unblock ends the blocking read in flight on the dedicated connection, if
// any, as if it had timed out. Sending it when no read is in flight is
// harmless, so callers repeat it until the reading goroutine has left.
func (b *blocker) unblock(ctx context.Context) error {
	b.mu.Lock()
	id := b.id
	b.mu.Unlock()
	if id == 0 {
		return nil
	}
	err := b.rdb.ClientUnblock(ctx, id).Err()
	if isNoPerm(err) { // the user's permissions changed since the probe
		b.fallBack(err)
		return nil
	}
	return err
}

// fine tells whether the dedicated connection may stay after a read that
// failed with err: an error reply says the connection works (NOGROUP:
// the group is gone), except one from a server that is no longer the
// master (READONLY: a replica refuses XREADGROUP; UNBLOCKED: Redis ended
// the read because it turned into a replica). After a failover the
// client sends its new connections to the new master, but a dedicated
// connection stays where it was, on the old one, until it is dropped.
func fine(err error) bool {
	var reply redis.Error
	if !errors.As(err, &reply) {
		return false
	}
	switch redisutil.ErrorCode(err) {
	case "READONLY", "UNBLOCKED":
		return false
	}
	return true
}

// close releases the dedicated connection. Call it once the reading
// goroutine has exited.
func (b *blocker) close() error { return b.reset() }

func closeConn(c *redis.Conn) error {
	if err := c.Close(); err != nil && !errors.Is(err, redis.ErrClosed) {
		return err
	}
	return nil
}
