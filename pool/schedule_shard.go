package pool

import (
	"context"
	"fmt"

	"github.com/redis/go-redis/v9"
	"github.com/shepherd-go/shepherd/internal/member"
)

// A schedule of a pool of several shards (WithShards) has its hash,
// plan:NAME, in every shard, with the same incarnation. The planner holds
// the lease of shard 0's, which says when the next plan is due, and a
// lease of each other shard's (same script, a token per shard). Its
// writes in a shard (the admissions, stops and notifications of the
// shard's keys, and its notes of them in that shard's plankeys:NAME) are
// fenced by that shard's lease, in the same script, so a planner that
// lost its lease in a shard is refused there, as in a pool of one shard.
// A planner plans only while it holds every shard's lease.

// mirrorScheduleScript stores a schedule in a shard i > 0 with shard 0's
// incarnation and interval (replacing another incarnation, whose lease
// then lapses before the new one is taken).
//
//	KEYS[1] plan:NAME, KEYS[2] plans
//	ARGV[1] name, ARGV[2] interval (ms), ARGV[3] shard 0's incarnation
var mirrorScheduleScript = redis.NewScript(member.LuaClock + `
if redis.call("HGET", KEYS[1], "inc") ~= ARGV[3] then
  redis.call("HSET", KEYS[1], "inc", ARGV[3], "created", now_ms())
end
redis.call("HSET", KEYS[1], "interval", ARGV[2])
redis.call("SADD", KEYS[2], ARGV[1])
return 1
`)

// mirrorSchedule stores the schedule name (incarnation inc) in every
// shard of the node's pool but shard 0.
func (n *Node) mirrorSchedule(ctx context.Context, name string, interval int64, inc string) error {
	for _, p := range n.partsOrSelf()[1:] {
		if _, err := p.run(ctx, mirrorScheduleScript, "schedule", []string{p.lay.plan(name), p.lay.plans}, name, interval, inc); err != nil {
			return fmt.Errorf("shard %d: %w", p.shard, err)
		}
	}
	return nil
}

// holdShards takes or renews the planner's lease in every shard but
// shard 0, after hold took shard 0's (r, HELD). It returns r, or WAIT
// (the shortest wait of the shards still held by another) or GONE as
// hold does; the tokens it took stay in p.tokens.
func (p *planner) holdShards(ctx context.Context, r holdResult) (holdResult, error) {
	parts := p.n.partsOrSelf()
	if len(parts) == 1 {
		return r, nil
	}
	out := r
	for _, part := range parts[1:] {
		res, err := p.holdIn(ctx, part, p.tokens[part.shard])
		if err != nil {
			return holdResult{}, fmt.Errorf("shard %d: %w", part.shard, err)
		}
		switch res.state {
		case "GONE":
			return res, nil
		case "WAIT":
			p.tokens[part.shard] = ""
			if out.state != "WAIT" || res.ms < out.ms {
				out = holdResult{state: "WAIT", ms: res.ms}
			}
		default:
			p.tokens[part.shard] = res.token
		}
	}
	return out, nil
}

// fenceOf returns the fence of the planner's writes in shard i.
func (p *planner) fenceOf(i int) fence {
	part := p.n.partsOrSelf()[i]
	if i == 0 {
		return fence{key: part.lay.plan(p.name), token: p.token}
	}
	return fence{key: part.lay.plan(p.name), token: p.tokens[i]}
}

// byShard groups keys by their shard: for each shard, the indexes in ks
// of its keys, in order.
func (p *planner) byShard(ks []string) [][]int {
	parts := p.n.partsOrSelf()
	out := make([][]int, len(parts))
	for i, k := range ks {
		s := shardOfKey(k, len(parts))
		out[s] = append(out[s], i)
	}
	return out
}

// pick returns the elements of ks at indexes idx.
func pick(ks []string, idx []int) []string {
	out := make([]string, len(idx))
	for j, i := range idx {
		out[j] = ks[i]
	}
	return out
}

// endInShards removes the schedule name from every shard but shard 0
// (Unschedule, ErrEndSchedule): unfenced, as Unschedule is; shard 0's
// removal, which every planner checks first, decides.
func endInShards(ctx context.Context, rdb redis.UniversalClient, lays []layout, name string) error {
	for _, l := range lays[1:] {
		if err := rdb.Del(ctx, l.plan(name), l.planKeys(name)).Err(); err != nil {
			return err
		}
		if err := rdb.SRem(ctx, l.plans, name).Err(); err != nil {
			return err
		}
	}
	return nil
}
