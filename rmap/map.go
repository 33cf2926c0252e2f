package rmap

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"

	"github.com/redis/go-redis/v9"
	"github.com/shepherd-go/shepherd/internal/redisutil"
)

// Map is a Redis hash mirrored in this process. Reads are served from the
// local copy under a lock and never touch Redis; writes run one Lua script
// each on Redis and are reflected locally before they return (see the
// package documentation for the guarantees). A Map is safe for concurrent
// use. Close it when done.
type Map struct {
	rdb  redis.UniversalClient
	name string
	cfg  config
	keys []string // hash, revision, channel: KEYS of every script

	// ps is used by the sync loop alone, which may replace it; psMu
	// guards the replacement against Close.
	psMu   sync.Mutex
	ps     *redis.PubSub
	cancel context.CancelFunc
	done   chan struct{} // closed when the sync loop has exited

	closeOnce sync.Once
	closeErr  error

	mu    sync.RWMutex
	data  map[string]string
	epoch string // the map's incarnation in Redis; "" before its first write
	rev   int64  // last revision applied to data
	// loading is true while the sync loop reloads; writers then leave the
	// local copy to the loop, whose snapshot may predate their write.
	loading  bool
	loadSeq  int64  // reloads started
	loadDone int64  // loadSeq of the last reload installed
	reloads  int64  // reloads installed (Join's load included)
	version  uint64 // local changes applied or installed: see Snapshot
	// reloadWanted asks the sync loop for a reload: a waiter cannot tell
	// whether a copy of another epoch is older or newer than what it
	// waits for, but a snapshot taken after its write includes the write.
	reloadWanted atomic.Bool
	// resyncWanted asks the sync loop for a new pub/sub connection and a
	// reload (Resync).
	resyncWanted atomic.Bool
	advanced     chan struct{} // closed on the next change of data; nil if nobody waits
	subs         map[*subscription]struct{}
	closed       bool

	pongs atomic.Int64 // revision checks answered on the pub/sub connection
}

// Join mirrors the map called name: it subscribes to the map's change
// channel, loads the current content with one script (a consistent
// snapshot) and starts one goroutine that keeps the local copy in sync
// until Close. The map need not exist in Redis; Join writes nothing.
//
// Keys live under the hash tag given by WithHashTag, which defaults to
// name. Join returns an error wrapping ErrInvalidOption for bad input (a
// nil client, an empty name, an invalid tag, a nil or invalid option), or
// the Redis or context error that stopped it.
func Join(ctx context.Context, rdb redis.UniversalClient, name string, opts ...Option) (*Map, error) {
	if redisutil.IsNil(rdb) {
		return nil, fmt.Errorf("%w: nil Redis client", ErrInvalidOption)
	}
	cfg := defaultConfig()
	for _, o := range opts {
		if o == nil {
			return nil, fmt.Errorf("%w: nil option", ErrInvalidOption)
		}
		if err := o(&cfg); err != nil {
			return nil, err
		}
	}
	tag := cfg.hashTag
	if tag == "" {
		tag = name
	}
	lay, err := KeysOf(tag, name)
	if err != nil {
		return nil, fmt.Errorf("rmap: join %q: %w", name, err)
	}
	m := &Map{
		rdb:  rdb,
		name: name,
		cfg:  cfg,
		keys: []string{lay.Hash, lay.Rev, lay.Channel},
		data: make(map[string]string),
		subs: make(map[*subscription]struct{}),
		done: make(chan struct{}),
	}
	if err := m.subscribe(ctx); err != nil {
		return nil, fmt.Errorf("rmap: join %q: %w", name, err)
	}
	// Subscribed before loading: whatever is published after the snapshot
	// reaches the loop, and what the snapshot already holds is ignored by
	// revision.
	if err := m.reload(ctx); err != nil {
		_ = m.ps.Close()
		return nil, fmt.Errorf("rmap: join %q: %w", name, err)
	}
	loopCtx, cancel := context.WithCancel(context.Background())
	m.cancel = cancel
	go m.run(loopCtx)
	return m, nil
}

// subscribe opens the pub/sub connection and waits for Redis to confirm the
// subscription, so that no change published after it is missed.
func (m *Map) subscribe(ctx context.Context) error {
	m.ps = m.rdb.Subscribe(ctx, m.keys[2])
	// Receive does not watch ctx; closing the PubSub unblocks it.
	stop := context.AfterFunc(ctx, func() { _ = m.ps.Close() })
	for {
		msg, err := m.ps.Receive(ctx)
		if err != nil {
			stop()
			_ = m.ps.Close()
			if ctx.Err() != nil {
				return ctx.Err()
			}
			return fmt.Errorf("subscribe: %w", err)
		}
		if s, ok := msg.(*redis.Subscription); ok && s.Kind == "subscribe" {
			if !stop() { // ctx ended and closed the PubSub meanwhile
				return ctx.Err()
			}
			return nil
		}
	}
}

// Name returns the map's name.
func (m *Map) Name() string { return m.name }

// Subscribe returns a channel of the changes applied to the local copy, in
// revision order, and a cancel func that stops delivery and closes the
// channel (idempotent; also done by Close). Events do not coalesce: every
// write yields its own events (Reset and Destroy one EventDelete per
// entry). A reload after a missed message, a reconnect or a Redis restart
// yields only the net difference between the old and the new copy. A
// subscriber that falls more than WithSubscriberBuffer events behind gets
// its backlog replaced by one EventResync. Delivery never blocks the Map.
// On a closed Map the channel is closed at once.
func (m *Map) Subscribe() (<-chan Event, func()) {
	s := newSubscription(m.cfg.subBuffer)
	m.mu.Lock()
	if m.closed {
		m.mu.Unlock()
		s.cancel()
		return s.out, func() {}
	}
	m.subs[s] = struct{}{}
	m.mu.Unlock()
	return s.out, func() {
		m.mu.Lock()
		delete(m.subs, s)
		m.mu.Unlock()
		s.cancel()
	}
}

// Resync makes the copy follow the server that the client sends its
// commands to now: the sync loop subscribes again on a new connection and
// reloads the whole map. Call it after a Redis failover: go-redis moves
// its commands to the new master at once, but leaves a pub/sub connection
// on the old one until that connection breaks, and changes written on the
// new master would not reach the copy meanwhile. It returns at once; the
// loop acts on it within moments (it wakes the loop by a PING). On a
// closed Map it does nothing.
func (m *Map) Resync(ctx context.Context) {
	m.mu.RLock()
	closed := m.closed
	m.mu.RUnlock()
	if closed {
		return
	}
	m.resyncWanted.Store(true)
	m.wakeLoop(ctx)
}

// Close stops keeping the local copy in sync, closes the pub/sub
// connection and every Subscribe channel, and waits for its goroutines.
// Reads keep serving the last copy; writes return ErrClosed. It does not
// close rdb. Close is idempotent and safe to call concurrently.
func (m *Map) Close() error {
	m.closeOnce.Do(func() {
		m.mu.Lock()
		m.closed = true
		subs := m.subs
		m.subs = nil
		m.wakeLocked()
		m.mu.Unlock()

		m.cancel()
		m.psMu.Lock()
		err := m.ps.Close()
		m.psMu.Unlock()
		if err != nil && !errors.Is(err, redis.ErrClosed) {
			m.closeErr = fmt.Errorf("rmap: close %q: %w", m.name, err)
		}
		<-m.done
		for s := range subs {
			s.cancel()
		}
	})
	return m.closeErr
}
