package queue

import (
	"context"
	"errors"

	"github.com/redis/go-redis/v9"
)

// The read side of sharding (shard.go): finding a task by id in the
// shards where it may be, and running a call by id until a shard holds
// the task. With one shard each of these is the one read or call of an
// unsharded queue.

// located is a task id with the layout of the shard that holds it.
type located struct {
	id  string
	lay layout
}

// locate pairs each id with the layout l.
func locate(l layout, ids []string) []located {
	out := make([]located, len(ids))
	for i, id := range ids {
		out[i] = located{id, l}
	}
	return out
}

// findTask reads fields (the first is the task's state) of the task id
// where it may be (idLayouts): the most likely shard first, then the
// others in one pipeline. It returns the shard's layout and the values,
// and ok false when no shard holds the task. Cost: one read, or two round
// trips for a caller's id not in its own shard (n reads).
func (q *Client) findTask(ctx context.Context, all []layout, id string, fields ...string) (layout, []any, bool, error) {
	where := idLayouts(all, id)
	v, err := readTaskNow(ctx, q.rdb, where[0], id, fields...)
	if err != nil {
		return layout{}, nil, false, err
	}
	if present(v) || len(where) == 1 {
		return where[0], v, present(v), nil
	}
	rest := where[1:]
	pipe := q.rdb.Pipeline()
	cmds := make([]*taskRead, len(rest))
	for i, l := range rest {
		cmds[i] = readTask(ctx, pipe, l, id, fields...)
	}
	if _, err := pipe.Exec(ctx); err != nil && !errors.Is(err, redis.Nil) {
		return layout{}, nil, false, err
	}
	for i, c := range cmds {
		if present(c.Val()) {
			return rest[i], c.Val(), true, nil
		}
	}
	return where[0], v, false, nil
}

// present tells whether an HMGET of a task's fields, its state first,
// found the task.
func present(v []any) bool {
	if len(v) == 0 {
		return false
	}
	s, _ := v[0].(string)
	return s != ""
}

// onShards runs call on the layouts in turn until one's result is not
// missing (the task is not in that shard), and returns that result: the
// last missing one when every shard answered so. A Redis error stops it.
func onShards(ls []layout, missing any, call func(l layout) (any, error)) (any, error) {
	var res any
	for _, l := range ls {
		var err error
		if res, err = call(l); err != nil || res != missing {
			return res, err
		}
	}
	return res, nil
}

// scheduleLayout is the shard of the schedule name whose tasks have the
// tenant ten ("" for none): the tenant's, else the name's.
func scheduleLayout(all []layout, name, ten string) layout {
	return all[scheduleShard(name, ten, len(all))]
}

// nameLayouts lists where the schedule name may be, most likely first:
// its name's shard (a schedule without a tenant is there), then the
// others.
func nameLayouts(all []layout, name string) []layout {
	if len(all) == 1 {
		return all
	}
	return firstThenOthers(all, shardOfKey(name, len(all)))
}
