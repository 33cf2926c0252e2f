package queue

import (
	"context"
	"errors"
	"fmt"

	"github.com/shepherd-go/shepherd/internal/keys"
	"github.com/shepherd-go/shepherd/internal/redisutil"
)

// ErrInUse is returned by Client.Delete while processes of the queue are
// live (their leases run), unless DeleteEvenIfLive is given.
var ErrInUse = errors.New("queue: in use by live processes")

// DeleteOption configures Client.Delete.
type DeleteOption func(*deleteConfig)

type deleteConfig struct{ evenIfLive bool }

// DeleteEvenIfLive deletes the queue even while processes have it open.
// They find it gone at their next keep-alive and register again, with
// the queue's defaults: close them first unless that is what you want.
// Defaults to refusing (ErrInUse).
func DeleteEvenIfLive() DeleteOption { return func(c *deleteConfig) { c.evenIfLive = true } }

// Delete removes every key of the queue from Redis, on every shard: its
// tasks in every state, results, dead letters, tenants, schedules,
// settings and history. It returns how many keys it removed (0 for a
// queue Redis does not hold). It refuses with ErrInUse, removing nothing,
// while a process has the queue open (Open, not yet closed, its lease
// running), unless DeleteEvenIfLive is given.
//
// It SCANs each shard's keys (every master of a Cluster): it costs
// O(keys in Redis), for operators and tests, not for a hot path. The
// home shard goes last, so that an interrupted Delete, run again, still
// finds every shard. A pool of the same name keeps its keys.
func (q *Client) Delete(ctx context.Context, opts ...DeleteOption) (int, error) {
	var cfg deleteConfig
	for _, o := range opts {
		o(&cfg)
	}
	all, err := q.layouts(ctx)
	if err != nil {
		return 0, err
	}
	if !cfg.evenIfLive {
		live, err := q.liveProcesses(ctx, all)
		if err != nil {
			return 0, fmt.Errorf("queue: delete: %w", err)
		}
		if len(live) > 0 {
			return 0, fmt.Errorf("%w: %q is open in %d processes (close them, or DeleteEvenIfLive)", ErrInUse, q.name, len(live))
		}
	}
	total := 0
	for i := len(all) - 1; i >= 0; i-- {
		sp, err := keys.New(shardName(q.name, all[i].shard))
		if err != nil {
			return total, err
		}
		n, err := redisutil.UnlinkCount(ctx, q.rdb, sp.KindPattern(keys.KindQueue))
		total += n
		if err != nil {
			return total, fmt.Errorf("queue: delete: shard %d: %w", all[i].shard, err)
		}
	}
	q.sh.all.Store(nil) // a queue made again may have another shard count
	return total, nil
}
