package rmap

import (
	"context"
	"errors"
	"net"
	"strconv"
	"time"

	"github.com/redis/go-redis/v9"
)

// Backoff between attempts while Redis is unreachable.
const (
	minBackoff = 10 * time.Millisecond
	maxBackoff = time.Second
)

// revCheck is a revision check in flight: the revision Redis held before
// a PING was sent on the pub/sub connection. Redis answers the PING after
// every message published before it, so once the PONG is in, the local
// copy must have reached that revision, or a message was lost.
type revCheck struct {
	token string
	epoch string
	rev   int64
	sent  time.Time
}

// run is the sync loop, the Map's one goroutine: it applies changes from
// pub/sub in revision order and reloads the whole map when it cannot trust
// the stream: a revision gap, a new subscription confirmation (go-redis
// reconnected and resubscribed under us, so messages may have been
// missed), a connection error, or a failed periodic revision check.
func (m *Map) run(ctx context.Context) {
	defer close(m.done)
	var (
		dirty     bool
		backoff   = minBackoff
		nextCheck = time.Now().Add(m.cfg.checkInterval)
		pending   *revCheck
		checks    int64
	)
	fail := func(what string, err error) bool {
		m.cfg.logger.Warn("rmap: "+what, "map", m.name, "err", err, "retry_in", backoff)
		dirty, pending = true, nil
		t := time.NewTimer(backoff)
		defer t.Stop()
		backoff = min(2*backoff, maxBackoff)
		select {
		case <-ctx.Done():
			return false
		case <-t.C:
			return true
		}
	}
	for ctx.Err() == nil {
		if dirty {
			if err := m.reload(ctx); err != nil {
				if ctx.Err() != nil || !fail("reload failed", err) {
					return
				}
				continue
			}
			m.cfg.logger.Info("rmap: reloaded", "map", m.name, "rev", m.Rev())
			dirty, backoff = false, minBackoff
		}
		now := time.Now()
		if pending == nil && !now.Before(nextCheck) {
			checks++
			c, err := m.startCheck(ctx, strconv.FormatInt(checks, 10))
			nextCheck = now.Add(m.cfg.checkInterval)
			if err != nil {
				if ctx.Err() != nil || !fail("revision check failed", err) {
					return
				}
				continue
			}
			pending = c
		}
		wait := time.Until(nextCheck)
		if pending != nil {
			// A PONG that does not come within an interval means the
			// connection died without an error (half-open TCP), which
			// go-redis would wait on forever: replace it and reload.
			wait = time.Until(pending.sent.Add(m.cfg.checkInterval))
			if wait <= 0 {
				m.cfg.logger.Warn("rmap: no answer to revision check; resubscribing", "map", m.name)
				dirty, pending = true, nil
				if !m.renewPubSub(ctx) {
					return
				}
				continue
			}
		}
		msg, err := m.ps.ReceiveTimeout(ctx, max(wait, time.Millisecond))
		if m.reloadWanted.Swap(false) {
			dirty = true
		}
		if m.resyncWanted.Swap(false) {
			// Resync: what msg carried is covered by the reload.
			m.cfg.logger.Info("rmap: subscribing again on the current master", "map", m.name)
			dirty, pending = true, nil
			if !m.renewPubSub(ctx) {
				return
			}
			continue
		}
		if err != nil {
			if ctx.Err() != nil {
				return
			}
			if errors.Is(err, redis.ErrClosed) {
				// Only the caller closing rdb gets here: nothing can
				// sync the copy any more.
				m.cfg.logger.Error("rmap: redis client closed; local copy no longer synced", "map", m.name)
				return
			}
			var ne net.Error
			if errors.As(err, &ne) && ne.Timeout() {
				continue
			}
			// go-redis reconnects on the next call; what was published
			// meanwhile is lost, hence the reload.
			if !fail("pub/sub receive failed", err) {
				return
			}
			continue
		}
		switch msg := msg.(type) {
		case *redis.Subscription:
			if msg.Kind == "subscribe" {
				m.cfg.logger.Info("rmap: resubscribed", "map", m.name)
				dirty, pending = true, nil
			}
		case *redis.Message:
			// While dirty, the coming reload covers every message received
			// before it: they were published before its snapshot.
			if !dirty && !m.applyMessage(msg.Payload) {
				dirty = true
			}
		case *redis.Pong:
			if pending != nil && msg.Payload == pending.token {
				m.pongs.Add(1)
				if !m.checkPassed(ctx, pending) {
					dirty = true
				}
				pending = nil
			}
		}
	}
}

// renewPubSub replaces a pub/sub connection that stopped answering without
// an error (a half-open TCP connection), which go-redis would keep forever.
// It reports false when the Map is closing.
func (m *Map) renewPubSub(ctx context.Context) bool {
	ps := m.rdb.Subscribe(ctx, m.keys[2])
	m.psMu.Lock()
	if ctx.Err() != nil { // Close has closed the old one already
		m.psMu.Unlock()
		_ = ps.Close()
		return false
	}
	old := m.ps
	m.ps = ps
	m.psMu.Unlock()
	if err := old.Close(); err != nil && !errors.Is(err, redis.ErrClosed) {
		m.cfg.logger.Warn("rmap: close stale pub/sub", "map", m.name, "err", err)
	}
	return true
}

// applyMessage applies one pub/sub change and reports false when the
// copy must be reloaded instead (a gap, a new incarnation, or a message it
// cannot parse).
func (m *Map) applyMessage(payload string) bool {
	c, err := parseChange(payload)
	if err != nil {
		m.cfg.logger.Error("rmap: bad change message", "map", m.name, "err", err)
		return false
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if c.epoch == m.epoch && c.rev <= m.rev {
		return true // already in the copy (a reload, or our own write)
	}
	if !m.nextLocked(&c) {
		m.cfg.logger.Info("rmap: revision gap", "map", m.name,
			"local_epoch", m.epoch, "local_rev", m.rev, "epoch", c.epoch, "rev", c.rev)
		return false
	}
	m.applyLocked(&c)
	return true
}

// startCheck reads Redis's revision and sends a PING after it on the
// pub/sub connection.
func (m *Map) startCheck(ctx context.Context, token string) (*revCheck, error) {
	epoch, rev, err := m.remoteRev(ctx)
	if err != nil {
		return nil, err
	}
	if err := m.ps.Ping(ctx, token); err != nil {
		return nil, err
	}
	return &revCheck{token: token, epoch: epoch, rev: rev, sent: time.Now()}, nil
}

// checkPassed reports whether the local copy, now that every message
// published before the check's PING has been received, has reached the
// revision read before it, and is not ahead of what Redis holds now (a
// Redis that came back from an older state).
func (m *Map) checkPassed(ctx context.Context, c *revCheck) bool {
	epoch, rev, err := m.remoteRev(ctx)
	if err != nil {
		m.cfg.logger.Warn("rmap: revision check failed", "map", m.name, "err", err)
		return false
	}
	m.mu.RLock()
	defer m.mu.RUnlock()
	if m.epoch != c.epoch || m.rev < c.rev {
		return m.epoch == epoch && m.rev >= rev // caught up since: fine
	}
	if m.epoch == epoch && m.rev > rev {
		m.cfg.logger.Warn("rmap: Redis holds an older revision than this copy: it lost changes (a failover or a restart); reloading",
			"map", m.name, "local_rev", m.rev, "redis_rev", rev)
	}
	return m.epoch == epoch && m.rev <= rev
}

func (m *Map) remoteRev(ctx context.Context) (string, int64, error) {
	st, err := m.rdb.HMGet(ctx, m.keys[1], "epoch", RevField).Result()
	if err != nil {
		return "", 0, err
	}
	epoch, _ := st[0].(string)
	var rev int64
	if s, ok := st[1].(string); ok {
		if rev, err = toInt(s); err != nil {
			return "", 0, err
		}
	}
	return epoch, rev, nil
}
