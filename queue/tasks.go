package queue

import (
	"context"
	"errors"
	"fmt"
	"sort"

	"github.com/redis/go-redis/v9"
)

// Tasks: the listing of a queue's tasks by state, merged across shards.

// Tasks lists up to limit tasks in state (StateWaiting, in the order they
// will be taken; StateDelayed and StateRetrying, soonest due first;
// StateActive; StateDead, newest first; StateDone and StateCancelled,
// newest first, among the latest 10,000 finished tasks whose outcome is
// still kept), skipping the first offset.
//
// On a queue of n shards (WithShards) the shards' lists are merged:
// waiting tasks are listed untenanted ones first (shard by shard, each in
// the order it is taken), then each tenant's by tenant id, as on one
// shard (the shards take in turn, so no order is the order of taking
// across them); delayed and retrying ones by due time, active ones by id,
// dead letters by the time they died, done and cancelled ones by the
// time they finished (each shard keeps its own latest 10,000). Each
// shard is read up to offset+limit, so a deep page costs n times that.
func (q *Client) Tasks(ctx context.Context, state State, offset, limit int) ([]TaskInfo, error) {
	if offset < 0 || limit < 1 {
		return nil, invalid("tasks need offset >= 0 and limit >= 1, got %d and %d", offset, limit)
	}
	switch state {
	case StateWaiting, StateDelayed, StateRetrying, StateActive:
	case StateDead:
		return q.DeadLetters(ctx, offset, limit)
	case StateDone, StateCancelled:
		return q.finished(ctx, state, offset, limit)
	default:
		return nil, invalid("no list of tasks in state %q", state)
	}
	all, err := q.layouts(ctx)
	if err != nil {
		return nil, err
	}
	var ids []located
	switch state {
	case StateWaiting:
		ids, err = q.waiting(ctx, all, offset, limit)
	case StateDelayed:
		ids, err = q.byScore(ctx, all, func(l layout) string { return l.delayed }, offset, limit)
	case StateRetrying:
		ids, err = q.byScore(ctx, all, func(l layout) string { return l.retry }, offset, limit)
	case StateActive:
		ids, err = q.active(ctx, all, offset, limit)
	}
	if err != nil {
		return nil, fmt.Errorf("queue: tasks: %w", err)
	}
	return q.infos(ctx, ids, true)
}

// byScore lists the ids of the sorted set key of every shard, lowest
// score first (ties by shard, then as Redis orders them), skipping
// offset.
func (q *Client) byScore(ctx context.Context, all []layout, key func(layout) string, offset, limit int) ([]located, error) {
	if len(all) == 1 {
		ids, err := q.rdb.ZRange(ctx, key(all[0]), int64(offset), int64(offset+limit-1)).Result()
		return locate(all[0], ids), err
	}
	pipe := q.rdb.Pipeline()
	cmds := make([]*redis.ZSliceCmd, len(all))
	for i, l := range all {
		cmds[i] = pipe.ZRangeWithScores(ctx, key(l), 0, int64(offset+limit-1))
	}
	if _, err := pipe.Exec(ctx); err != nil {
		return nil, err
	}
	return mergeScored(all, cmds, false, offset, limit), nil
}

// mergeScored merges the shards' sorted members, each list in its
// order (descending when desc), by score, ties by shard, and returns the
// window [offset, offset+limit).
func mergeScored(all []layout, cmds []*redis.ZSliceCmd, desc bool, offset, limit int) []located {
	type scored struct {
		located
		score float64
		shard int
	}
	var merged []scored
	for i, c := range cmds {
		for _, z := range c.Val() {
			id, _ := z.Member.(string)
			merged = append(merged, scored{located{id, all[i]}, z.Score, i})
		}
	}
	sort.SliceStable(merged, func(i, j int) bool {
		a, b := merged[i], merged[j]
		if a.score != b.score {
			return (a.score < b.score) != desc
		}
		return a.shard < b.shard
	})
	var out []located
	for i := offset; i < len(merged) && i < offset+limit; i++ {
		out = append(out, merged[i].located)
	}
	return out
}

// active lists the ids of the tasks in flight, by id.
func (q *Client) active(ctx context.Context, all []layout, offset, limit int) ([]located, error) {
	pipe := q.rdb.Pipeline()
	cmds := make([]*redis.StringSliceCmd, len(all))
	for i, l := range all {
		cmds[i] = pipe.HKeys(ctx, l.active)
	}
	if _, err := pipe.Exec(ctx); err != nil {
		return nil, err
	}
	var ids []located
	for i, c := range cmds {
		ids = append(ids, locate(all[i], c.Val())...)
	}
	sort.SliceStable(ids, func(i, j int) bool { return ids[i].id < ids[j].id })
	if offset >= len(ids) {
		return nil, nil
	}
	return ids[offset:min(offset+limit, len(ids))], nil
}

// waiting lists waiting tasks: the untenanted ones (shard by shard), then
// each tenant's (by tenant id, in its shard), each in the order it is
// taken (by priority, then in order). Besides the tenants, it costs two
// round trips: the lists' lengths, then the parts it lists.
func (q *Client) waiting(ctx context.Context, all []layout, offset, limit int) ([]located, error) {
	tenants, err := q.tenantsOf(ctx, all)
	if err != nil {
		return nil, err
	}
	var lists []readyList
	for _, l := range all {
		lists = readyLists(lists, l, "")
	}
	for _, ten := range tenantIDs(tenants) {
		lists = readyLists(lists, tenantLayout(all, ten), ten)
	}
	return q.readyWindow(ctx, lists, offset, limit)
}

// readyList is one of the lists of waiting tasks, in its shard.
type readyList struct {
	lay layout
	key string
}

// readyLists appends the lists of ten's waiting tasks in the shard l,
// in the order they are taken: by priority, highest first.
func readyLists(lists []readyList, l layout, ten string) []readyList {
	for p := MaxPriority; p >= 0; p-- {
		lists = append(lists, readyList{l, l.tenantReady(ten, p)})
	}
	return lists
}

// readyWindow lists the ids of lists, one after the other, each oldest
// first, skipping offset.
func (q *Client) readyWindow(ctx context.Context, lists []readyList, offset, limit int) ([]located, error) {
	// The lists' lengths in one round trip, then the parts of those the
	// window covers in another.
	pipe := q.rdb.Pipeline()
	lens := make([]*redis.IntCmd, len(lists))
	for i, li := range lists {
		lens[i] = pipe.LLen(ctx, li.key)
	}
	if _, err := pipe.Exec(ctx); err != nil {
		return nil, err
	}
	pipe = q.rdb.Pipeline()
	type part struct {
		lay  layout
		cmds *redis.StringSliceCmd
	}
	var parts []part
	want := limit
	for i, li := range lists {
		n := lens[i].Val()
		if n == 0 {
			continue
		}
		if int64(offset) >= n {
			offset -= int(n)
			continue
		}
		// Taken from the right: the oldest is last.
		take := min(int64(want), n-int64(offset))
		parts = append(parts, part{li.lay, pipe.LRange(ctx, li.key, -int64(offset)-take, -int64(offset)-1)})
		offset = 0
		if want -= int(take); want == 0 {
			break
		}
	}
	if len(parts) == 0 {
		return nil, nil
	}
	if _, err := pipe.Exec(ctx); err != nil {
		return nil, err
	}
	var ids []located
	for _, p := range parts {
		v := p.cmds.Val()
		for i := len(v) - 1; i >= 0; i-- {
			ids = append(ids, located{v[i], p.lay})
		}
	}
	if len(ids) > limit { // a list grew between the two round trips
		ids = ids[:limit]
	}
	return ids, nil
}

// infos reads the tasks ids, each in its shard, in one pipeline; those
// gone meanwhile are left out. mayRun tells whether they may be running
// (listed as not finished): their attempts are read from active too
// (TaskInfo.running); finished ones and dead letters need not.
func (q *Client) infos(ctx context.Context, ids []located, mayRun bool) ([]TaskInfo, error) {
	if len(ids) == 0 {
		return nil, nil
	}
	pipe := q.rdb.Pipeline()
	cmds := make([]*taskRead, len(ids))
	runs := make([]*redis.StringCmd, len(ids))
	for i, t := range ids {
		cmds[i] = readTask(ctx, pipe, t.lay, t.id, taskFields...)
		if mayRun {
			runs[i] = pipe.HGet(ctx, t.lay.active, t.id)
		}
	}
	if _, err := pipe.Exec(ctx); err != nil && !errors.Is(err, redis.Nil) {
		return nil, fmt.Errorf("queue: tasks: %w", err)
	}
	out := make([]TaskInfo, 0, len(ids))
	for i, t := range ids {
		if info, ok := parseTask(t.id, cmds[i].Val()); ok {
			if mayRun {
				info.running(runs[i].Val())
			}
			out = append(out, info)
		}
	}
	return out, nil
}

func tenantIDs(ts []TenantInfo) []string {
	ids := make([]string, len(ts))
	for i, t := range ts {
		ids[i] = t.ID
	}
	return ids
}

// maxFinishedListed bounds the list of the latest finished tasks (done
// or cancelled) that Tasks reads: finish pushes, flush trims.
const maxFinishedListed = 10_000

// finished lists finished tasks in state from the lists of the latest
// ones, newest first, skipping those whose outcome expired. On a queue of
// n shards each shard's first offset+limit are read and merged by the
// time they finished.
func (q *Client) finished(ctx context.Context, state State, offset, limit int) ([]TaskInfo, error) {
	all, err := q.layouts(ctx)
	if err != nil {
		return nil, err
	}
	if len(all) == 1 {
		return q.finishedIn(ctx, all[0], state, offset, limit)
	}
	var merged []TaskInfo
	for _, l := range all {
		part, err := q.finishedIn(ctx, l, state, 0, offset+limit)
		if err != nil {
			return nil, err
		}
		merged = append(merged, part...)
	}
	// Each shard's part is newest first: a stable sort keeps that order
	// among equal times.
	sort.SliceStable(merged, func(i, j int) bool { return merged[i].Finished.After(merged[j].Finished) })
	if offset >= len(merged) {
		return nil, nil
	}
	return merged[offset:min(offset+limit, len(merged))], nil
}

// finishedIn lists the finished tasks in state of the shard l.
func (q *Client) finishedIn(ctx context.Context, l layout, state State, offset, limit int) ([]TaskInfo, error) {
	const chunk = 500
	var out []TaskInfo
	seen := map[string]bool{} // an id used again is listed once
	for from := int64(0); from < maxFinishedListed && len(out) < limit; from += chunk {
		ids, err := q.rdb.LRange(ctx, l.finished, from, from+chunk-1).Result()
		if err != nil {
			return nil, fmt.Errorf("queue: tasks: %w", err)
		}
		infos, err := q.infos(ctx, locate(l, ids), false)
		if err != nil {
			return nil, err
		}
		for _, t := range infos {
			if t.State != state || seen[t.ID] {
				continue
			}
			seen[t.ID] = true
			if offset > 0 {
				offset--
				continue
			}
			if len(out) < limit {
				out = append(out, t)
			}
		}
		if len(ids) < chunk {
			break
		}
	}
	return out, nil
}
