package streaming

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"
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
// cmd and reset belong to the reading goroutine; unblock and close may be
// called from any goroutine.
type blocker struct {
	rdb    redis.UniversalClient
	client *redis.Client // nil: no dedicated connection possible

	mu   sync.Mutex
	conn *redis.Conn
	id   int64 // CLIENT ID of conn; 0 when there is none
}

func newBlocker(rdb redis.UniversalClient) *blocker {
	b := &blocker{rdb: rdb}
	b.client, _ = rdb.(*redis.Client)
	return b
}

// cmd returns where to send the next blocking read and how long it may
// block given the wanted duration.
func (b *blocker) cmd(ctx context.Context, block time.Duration) (redis.Cmdable, time.Duration, error) {
	if b.client == nil {
		return b.rdb, min(block, fallbackBlock), nil
	}
	b.mu.Lock()
	conn := b.conn
	b.mu.Unlock()
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
	if err != nil {
		return nil, 0, errors.Join(fmt.Errorf("dedicated connection: %w", err), closeConn(conn))
	}
	b.mu.Lock()
	b.conn, b.id = conn, id
	b.mu.Unlock()
	return conn, block, nil
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
	return b.rdb.ClientUnblock(ctx, id).Err()
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
