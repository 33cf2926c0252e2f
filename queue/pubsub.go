package queue

import (
	"context"
	"errors"
	"fmt"

	"github.com/redis/go-redis/v9"
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
	subs    []*redis.PubSub // classic: one; sharded: one a shard, in the shards' order
}

// subscribe subscribes to the channels of one shard, and waits until
// Redis confirms each: a message published after it returns reaches the
// process.
func (s *subscription) subscribe(ctx context.Context, channels ...string) error {
	var err error
	switch {
	case s.sharded:
		ps := s.rdb.(*redis.ClusterClient).SSubscribe(ctx)
		s.subs = append(s.subs, ps)
		err = ps.SSubscribe(ctx, channels...)
	case len(s.subs) == 0:
		s.subs = append(s.subs, s.rdb.Subscribe(ctx))
		fallthrough
	default:
		err = s.subs[0].Subscribe(ctx, channels...)
	}
	for range channels {
		if err != nil {
			break
		}
		_, err = s.subs[len(s.subs)-1].ReceiveTimeout(ctx, 0)
	}
	if err != nil && s.sharded {
		return fmt.Errorf("subscribe (sharded pub/sub, which a queue on Redis Cluster uses, needs Redis 7.0): %w", err)
	}
	if err != nil {
		return fmt.Errorf("subscribe: %w", err)
	}
	return nil
}

// messages returns the messages of every shard's channels on one
// channel, until ctx ends.
func (s *subscription) messages(ctx context.Context, spawn func(func()) bool) <-chan *redis.Message {
	if len(s.subs) == 1 {
		return s.subs[0].Channel(redis.WithChannelSize(1024))
	}
	all := make(chan *redis.Message, 1024)
	for _, ps := range s.subs {
		in := ps.Channel(redis.WithChannelSize(1024))
		spawn(func() {
			for {
				select {
				case m, ok := <-in:
					if !ok {
						return
					}
					select {
					case all <- m:
					case <-ctx.Done():
						return
					}
				case <-ctx.Done():
					return
				}
			}
		})
	}
	return all
}

// close closes every connection.
func (s *subscription) close() error {
	var errs []error
	for _, ps := range s.subs {
		if err := ps.Close(); err != nil && !errors.Is(err, redis.ErrClosed) {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}
