package queue

import (
	"context"
	"fmt"

	"github.com/redis/go-redis/v9"

	"github.com/shepherd-go/shepherd/internal/redisutil"
)

// Client reads and manages a queue without joining it: it registers no
// process and runs nothing in the background, which suits operators'
// tools. A Queue is a Client too. A Client is safe for concurrent use.
//
// On a queue of several shards (WithShards) a Client reads the shard
// count from Redis at its first call and keeps it; its readers (Stats,
// Tasks, DeadLetters, History...) read every shard and add up or merge,
// and its calls by id act in the shard that holds the task.
type Client struct {
	rdb  redis.UniversalClient
	name string
	lay  layout // the home shard's (shard 0): the whole queue's when it has one shard
	sh   shards // every shard's (shard.go)
}

// NewClient returns a Client of the queue called name on rdb. It checks
// its arguments only; see Exists.
func NewClient(rdb redis.UniversalClient, name string) (*Client, error) {
	if redisutil.IsNil(rdb) {
		return nil, invalid("nil Redis client")
	}
	lay, err := queueLayout(name)
	if err != nil {
		return nil, err
	}
	lay.spub = shardedPubSub(rdb)
	return &Client{rdb: rdb, name: name, lay: lay}, nil
}

// Name returns the queue's name.
func (q *Client) Name() string { return q.name }

// Exists reports whether Redis holds the queue: a process opened it and
// Redis has not lost it since.
func (q *Client) Exists(ctx context.Context) (bool, error) {
	n, err := q.rdb.Exists(ctx, q.lay.settings).Result()
	if err != nil {
		return false, fmt.Errorf("queue: exists: %w", err)
	}
	return n == 1, nil
}
