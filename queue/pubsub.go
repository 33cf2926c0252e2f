package queue

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/shepherd-go/shepherd/internal/backoff"
)

// shardedPubSub tells whether a queue's messages go by sharded pub/sub
// (SPUBLISH, SSUBSCRIBE): on a Redis Cluster client. A classic PUBLISH
// on a cluster is sent to every node, so that every master pays for
// every message of every queue; a sharded one goes to the master of its
// channel's slot, the shard's own, and its replicas only. It needs Redis
// 7.0 on every node. Elsewhere the queue keeps classic pub/sub (Redis
// 6.2 works).
func shardedPubSub(rdb redis.UniversalClient) bool {
	_, ok := rdb.(*redis.ClusterClient)
	return ok
}

// subscription is a process's pub/sub: one connection of classic
// pub/sub for every shard's channels, or with sharded pub/sub one a
// shard, to the shard's master (SSUBSCRIBE takes the channels of one
// slot only).
type subscription struct {
	rdb     redis.UniversalClient
	sharded bool

	mu       sync.Mutex
	closed   bool
	subs     []*redis.PubSub // classic: one; sharded: one a shard, in the shards' order
	channels [][]string      // the channels of each of subs
}

// subscribe subscribes to the channels of one shard, and waits until
// Redis confirms each: a message published after it returns reaches the
// process.
func (s *subscription) subscribe(ctx context.Context, channels ...string) error {
	if s.sharded {
		ps, err := s.ssubscribe(ctx, channels)
		if err != nil {
			return fmt.Errorf("subscribe (sharded pub/sub, which a queue on Redis Cluster uses, needs Redis 7.0): %w", err)
		}
		s.mu.Lock()
		defer s.mu.Unlock()
		if s.closed {
			_ = ps.Close()
			return redis.ErrClosed
		}
		s.subs = append(s.subs, ps)
		s.channels = append(s.channels, channels)
		return nil
	}
	s.mu.Lock()
	if len(s.subs) == 0 {
		s.subs = append(s.subs, s.rdb.Subscribe(ctx))
		s.channels = append(s.channels, nil)
	}
	ps := s.subs[0]
	s.channels[0] = append(s.channels[0], channels...)
	s.mu.Unlock()
	if err := confirmed(ctx, ps, len(channels), ps.Subscribe(ctx, channels...)); err != nil {
		return fmt.Errorf("subscribe: %w", err)
	}
	return nil
}

// renew subscribes to the channels of connection i (classic: 0; sharded:
// shard i) on a new connection, to the server that the client sends its
// commands to now, and closes the old one once Redis confirmed the new
// subscriptions: after a failover, go-redis moves its commands to the new
// master but leaves a pub/sub connection where it is (on the demoted
// master) until that connection breaks. A message published between the
// two may come twice (a wake-up, an outcome: each harmless), one
// published on the old master alone is lost, as on a reconnect.
func (s *subscription) renew(ctx context.Context, i int) error {
	s.mu.Lock()
	if s.closed || i >= len(s.subs) {
		s.mu.Unlock()
		return nil
	}
	channels := s.channels[i]
	s.mu.Unlock()
	var ps *redis.PubSub
	if s.sharded {
		s.rdb.(*redis.ClusterClient).ReloadState(ctx)
		var err error
		if ps, err = s.ssubscribe(ctx, channels); err != nil {
			return err
		}
	} else {
		ps = s.rdb.Subscribe(ctx)
		if err := confirmed(ctx, ps, len(channels), ps.Subscribe(ctx, channels...)); err != nil {
			_ = ps.Close()
			return err
		}
	}
	s.swap(i, ps) // follow goes on with ps
	return nil
}

// swap makes ps connection i and closes the old one; it closes ps instead
// when the subscription is closed, and then returns false.
func (s *subscription) swap(i int, ps *redis.PubSub) bool {
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		_ = ps.Close()
		return false
	}
	old := s.subs[i]
	s.subs[i] = ps
	s.mu.Unlock()
	_ = old.Close()
	return true
}

// confirmed waits for Redis to confirm n subscriptions on ps after a
// subscribe that returned err, and returns the first error. Each
// confirmation waits confirmWait at most: a read of a PubSub with no
// timeout has no socket deadline, and the loops that renew subscriptions
// run on ctxs without one, so a Redis that froze meanwhile held them,
// and Queue.Close waiting for them, for the whole freeze.
func confirmed(ctx context.Context, ps *redis.PubSub, n int, err error) error {
	for range n {
		if err != nil {
			return err
		}
		_, err = ps.ReceiveTimeout(ctx, confirmWait)
	}
	return err
}

// confirmWait bounds the wait for one subscription's confirmation.
const confirmWait = 5 * time.Second

// ssubscribe returns a new connection subscribed to channels, all of one
// slot, on the node that the client says serves it, once Redis confirmed
// each.
func (s *subscription) ssubscribe(ctx context.Context, channels []string) (*redis.PubSub, error) {
	ps := s.rdb.(*redis.ClusterClient).SSubscribe(ctx)
	if err := confirmed(ctx, ps, len(channels), ps.SSubscribe(ctx, channels...)); err != nil {
		_ = ps.Close()
		return nil, err
	}
	return ps, nil
}

// messages returns the messages of every shard's channels on one
// channel, until ctx ends.
func (s *subscription) messages(ctx context.Context, spawn func(func()) bool) <-chan *redis.Message {
	all := make(chan *redis.Message, 1024)
	for i := range s.subs {
		spawn(func() { s.follow(ctx, i, all) })
	}
	return all
}

// follow sends the messages of shard i to all until ctx ends. When Redis
// unsubscribes the shard's channels itself (SUNSUBSCRIBE: their slot left
// the node, which a failover that keeps the old master up, or a slot
// migration, does), the connection stays to a node that sends nothing
// more, and go-redis does not subscribe again: follow subscribes anew, on
// the node the client says serves the slot: the new master, or the old
// one (now its replica, which Redis sends the shard's messages too) until
// the client hears of the failover. Messages published meanwhile are
// lost, as on a reconnect (listen says what makes up for them).
//
// A connection that renew replaced closes: follow goes on with the new
// one.
func (s *subscription) follow(ctx context.Context, i int, all chan<- *redis.Message) {
	s.mu.Lock()
	ps := s.subs[i]
	s.mu.Unlock()
	for {
		in := ps.ChannelWithSubscriptions(redis.WithChannelSize(1024))
		if forward(ctx, in, all) {
			if ps = s.resubscribe(ctx, i); ps == nil {
				return
			}
			continue
		}
		s.mu.Lock()
		next, closed := s.subs[i], s.closed
		s.mu.Unlock()
		if closed || next == ps || ctx.Err() != nil {
			return
		}
		ps = next // renewed
	}
}

// forward sends the messages of in to all, and returns true when Redis
// unsubscribed the channels, false when ctx ended or in closed.
func forward(ctx context.Context, in <-chan any, all chan<- *redis.Message) bool {
	for {
		select {
		case m, ok := <-in:
			if !ok {
				return false
			}
			switch m := m.(type) {
			case *redis.Message:
				select {
				case all <- m:
				case <-ctx.Done():
					return false
				}
			case *redis.Subscription:
				// The queue never unsubscribes: this is Redis. (The
				// confirmations of go-redis's own resubscription after a
				// reconnect say "ssubscribe".)
				if m.Kind == "sunsubscribe" {
					return true
				}
			}
		case <-ctx.Done():
			return false
		}
	}
}

// resubscribe subscribes to shard i's channels on a new connection and
// closes the old one; it tries until it succeeds (nil when ctx ends or
// the subscription closes). The client is told to reload its map of the
// slots first: it may not know yet where the slot went.
func (s *subscription) resubscribe(ctx context.Context, i int) *redis.PubSub {
	bo := backoff.Backoff{Min: 50 * time.Millisecond, Max: time.Second}
	for {
		s.rdb.(*redis.ClusterClient).ReloadState(ctx)
		if !backoff.Sleep(bo.Next(), ctx.Done()) {
			return nil
		}
		ps, err := s.ssubscribe(ctx, s.channels[i])
		if err != nil {
			continue
		}
		if !s.swap(i, ps) {
			return nil
		}
		return ps
	}
}

// close closes every connection.
func (s *subscription) close() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.closed = true
	var errs []error
	for _, ps := range s.subs {
		if err := ps.Close(); err != nil && !errors.Is(err, redis.ErrClosed) {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}
