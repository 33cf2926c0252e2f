package queue

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"strings"

	"github.com/redis/go-redis/v9"
)

// ErrNotIndexed is returned by TenantTasks for delayed or retrying tasks
// while the queue holds some of them that an earlier version queued: it
// kept no per-tenant sets, so a tenant's list would miss them. It goes
// once those tasks have come due (Tasks still lists them all).
var ErrNotIndexed = errors.New("queue: delayed or retrying tasks queued by an earlier version are not indexed by tenant")

// TenantTasks lists the tasks of tenant ("" for the untenanted ones) in
// state, skipping the first offset, at most limit, exactly at any depth
// and in the order Tasks lists them:
//
//   - waiting: from the tenant's own lists (the ones take reads), by
//     priority, oldest first: O(offset+limit);
//   - delayed and retrying: from the tenant's part of the delayed and
//     retry sets, which the scripts that move tasks keep beside them
//     (tdelayed:TENANT, tretry:TENANT), by due time: O(log n + limit),
//     plus one ZCARD a tenant to check that the sets hold every task
//     (else ErrNotIndexed);
//   - in flight: from the tasks in flight, whose attempts carry their
//     tenant: O(tasks in flight);
//   - dead, done and cancelled: from their bounded lists (at most
//     MaxDeadLetters dead letters, 10,000 finished tasks a shard), one
//     field read a task: O(list).
//
// On a queue of n shards a tenant's tasks are in its shard; untenanted
// ones are merged from every shard as Tasks does.
func (q *Client) TenantTasks(ctx context.Context, tenant string, state State, offset, limit int) ([]TaskInfo, error) {
	if offset < 0 || limit < 1 {
		return nil, invalid("tasks need offset >= 0 and limit >= 1, got %d and %d", offset, limit)
	}
	all, err := q.layouts(ctx)
	if err != nil {
		return nil, err
	}
	in := all // the shards that hold the tenant's tasks
	if tenant != "" {
		in = []layout{tenantLayout(all, tenant)}
	}
	var ids []located
	switch state {
	case StateWaiting:
		var lists []readyList
		for _, l := range in {
			lists = readyLists(lists, l, tenant)
		}
		ids, err = q.readyWindow(ctx, lists, offset, limit)
	case StateDelayed, StateRetrying:
		if err = q.checkIndexed(ctx, all, state); err != nil {
			return nil, err
		}
		key := func(l layout) string { return l.tenantDelayed(tenant) }
		if state == StateRetrying {
			key = func(l layout) string { return l.tenantRetry(tenant) }
		}
		ids, err = q.byScore(ctx, in, key, offset, limit)
	case StateActive:
		ids, err = q.activeOf(ctx, in, tenant, offset, limit)
	case StateDead, StateDone, StateCancelled:
		return q.finishedOf(ctx, in, tenant, state, offset, limit)
	default:
		return nil, invalid("no list of tasks in state %q", state)
	}
	if err != nil {
		return nil, fmt.Errorf("queue: tenant tasks: %w", err)
	}
	return q.infos(ctx, ids, true)
}

// checkIndexed returns ErrNotIndexed when the per-tenant sets of state
// (delayed or retrying) hold fewer tasks than the queue's own set: some
// were queued by a version that kept none. One ZCARD a tenant and a
// shard, in one round trip.
func (q *Client) checkIndexed(ctx context.Context, all []layout, state State) error {
	tenants, err := q.tenantsOf(ctx, all)
	if err != nil {
		return err
	}
	pipe := q.rdb.Pipeline()
	var whole, parts []*redis.IntCmd
	for _, l := range all {
		if state == StateDelayed {
			whole = append(whole, pipe.ZCard(ctx, l.delayed))
			parts = append(parts, pipe.ZCard(ctx, l.tenantDelayed("")))
		} else {
			whole = append(whole, pipe.ZCard(ctx, l.retry))
			parts = append(parts, pipe.ZCard(ctx, l.tenantRetry("")))
		}
	}
	for _, ten := range tenantIDs(tenants) {
		l := tenantLayout(all, ten)
		if state == StateDelayed {
			parts = append(parts, pipe.ZCard(ctx, l.tenantDelayed(ten)))
		} else {
			parts = append(parts, pipe.ZCard(ctx, l.tenantRetry(ten)))
		}
	}
	if _, err := pipe.Exec(ctx); err != nil {
		return fmt.Errorf("queue: tenant tasks: %w", err)
	}
	var w, p int64
	for _, c := range whole {
		w += c.Val()
	}
	for _, c := range parts {
		p += c.Val()
	}
	if p < w {
		return fmt.Errorf("%w (%d of %d %s tasks are)", ErrNotIndexed, p, w, state)
	}
	return nil
}

// activeOf lists the ids of tenant's tasks in flight in the shards in,
// by id: an attempt's value in active ends with its tenant (inFlight);
// one written by an earlier version does not, and its task's record is
// read.
func (q *Client) activeOf(ctx context.Context, in []layout, tenant string, offset, limit int) ([]located, error) {
	pipe := q.rdb.Pipeline()
	cmds := make([]*redis.MapStringStringCmd, len(in))
	for i, l := range in {
		cmds[i] = pipe.HGetAll(ctx, l.active)
	}
	if _, err := pipe.Exec(ctx); err != nil {
		return nil, err
	}
	var ids, unsure []located
	for i, c := range cmds {
		for id, v := range c.Val() {
			parts := strings.SplitN(v, "\n", runningParts)
			switch {
			case len(parts) < runningParts:
				unsure = append(unsure, located{id, in[i]})
			case parts[runningParts-1] == tenant:
				ids = append(ids, located{id, in[i]})
			}
		}
	}
	if len(unsure) > 0 {
		pipe = q.rdb.Pipeline()
		reads := make([]*taskRead, len(unsure))
		for i, t := range unsure {
			reads[i] = readTask(ctx, pipe, t.lay, t.id, fieldTenant)
		}
		if _, err := pipe.Exec(ctx); err != nil && !errors.Is(err, redis.Nil) {
			return nil, err
		}
		for i, t := range unsure {
			if ten, _ := reads[i].Val()[0].(string); ten == tenant {
				ids = append(ids, t)
			}
		}
	}
	sort.Slice(ids, func(i, j int) bool { return ids[i].id < ids[j].id })
	if offset >= len(ids) {
		return nil, nil
	}
	return ids[offset:min(offset+limit, len(ids))], nil
}

// finishedOf lists tenant's finished tasks in state (dead, done or
// cancelled), newest first: the whole bounded list of the state (dead
// letters; the latest finished tasks) of each shard of in, the tenant
// and state of each read in one pipeline, then the window's tasks.
func (q *Client) finishedOf(ctx context.Context, in []layout, tenant string, state State, offset, limit int) ([]TaskInfo, error) {
	type cand struct {
		located
		at float64 // when it finished, to merge shards: the dead set's score, else the list's order
	}
	var cands []cand
	for _, l := range in {
		var ids []string
		var scores []float64
		if state == StateDead {
			zs, err := q.rdb.ZRevRangeWithScores(ctx, l.dead, 0, -1).Result()
			if err != nil {
				return nil, fmt.Errorf("queue: tenant tasks: %w", err)
			}
			for _, z := range zs {
				ids, scores = append(ids, z.Member.(string)), append(scores, z.Score)
			}
		} else {
			list, err := q.rdb.LRange(ctx, l.finished, 0, maxFinishedListed-1).Result()
			if err != nil {
				return nil, fmt.Errorf("queue: tenant tasks: %w", err)
			}
			ids = list
		}
		pipe := q.rdb.Pipeline()
		reads := make([]*redis.SliceCmd, len(ids))
		for i, id := range ids {
			reads[i] = pipe.HMGet(ctx, l.task(id), fieldState, fieldTenant, fieldFinished)
		}
		if _, err := pipe.Exec(ctx); err != nil && !errors.Is(err, redis.Nil) {
			return nil, fmt.Errorf("queue: tenant tasks: %w", err)
		}
		seen := map[string]bool{} // an id used again is listed once
		for i, id := range ids {
			v := reads[i].Val()
			st, _ := v[0].(string)
			ten, _ := v[1].(string)
			if State(st) != state || ten != tenant || seen[id] {
				continue
			}
			seen[id] = true
			at := 0.0
			if scores != nil {
				at = scores[i]
			} else if fin, ok := v[2].(string); ok {
				fmt.Sscan(fin, &at)
			}
			cands = append(cands, cand{located{id, l}, at})
		}
	}
	if len(in) > 1 {
		sort.SliceStable(cands, func(i, j int) bool { return cands[i].at > cands[j].at })
	}
	if offset >= len(cands) {
		return nil, nil
	}
	ids := make([]located, 0, limit)
	for _, c := range cands[offset:min(offset+limit, len(cands))] {
		ids = append(ids, c.located)
	}
	return q.infos(ctx, ids, false)
}
