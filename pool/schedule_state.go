package pool

import (
	"context"
	"fmt"

	"github.com/redis/go-redis/v9"
	"github.com/shepherd-go/shepherd/internal/member"
)

// What a schedule reads and notes in Redis to diff a plan against what
// runs: each key's state, the stored payloads of keys it adopts, its own
// keys, and its notes of them.

type keyState struct {
	running bool
	digest  string // noted by the schedule; "" for none
}

// state reads, for each key, whether it runs (the pool has its record)
// and the digest the schedule noted.
func (p *planner) state(ctx context.Context, ks []string) ([]keyState, error) {
	out := make([]keyState, len(ks))
	for shard, idx := range p.byShard(ks) {
		st, err := p.shardState(ctx, p.n.partsOrSelf()[shard], pick(ks, idx))
		if err != nil {
			return nil, err
		}
		for j, i := range idx {
			out[i] = st[j]
		}
	}
	return out, nil
}

// shardState is state of keys of part's shard.
func (p *planner) shardState(ctx context.Context, part *Node, ks []string) ([]keyState, error) {
	out := make([]keyState, 0, len(ks))
	for from := 0; from < len(ks); from += planChunk {
		chunk := ks[from:min(from+planChunk, len(ks))]
		args := make([]any, len(chunk))
		for i, k := range chunk {
			args[i] = k
		}
		cctx, cancel := context.WithTimeout(ctx, loopCallTimeout)
		res, err := part.run(cctx, planStateScript, "schedule state", []string{part.lay.jobs, part.lay.planKeys(p.name)}, args...)
		cancel()
		if err != nil {
			return nil, err
		}
		v, _ := res.([]any)
		if len(v) != 2*len(chunk) {
			return nil, fmt.Errorf("pool: schedule state: unexpected reply of %d items for %d keys", len(v), len(chunk))
		}
		for i := range chunk {
			d, _ := v[2*i+1].(string)
			out = append(out, keyState{running: v[2*i] == int64(1), digest: d})
		}
	}
	return out, nil
}

// planStateScript reads keys' state for a plan.
//
//	KEYS[1] jobs, KEYS[2] plankeys:NAME; ARGV the keys
//
// Returns, per key, 1 if the pool has it (0 if not) and the digest the
// schedule noted ("" for none).
var planStateScript = redis.NewScript(`
local out = {}
for i, k in ipairs(ARGV) do
  out[2 * i - 1] = redis.call("HEXISTS", KEYS[1], k)
  out[2 * i] = redis.call("HGET", KEYS[2], k) or ""
end
return out
`)

// payloads reads the stored payloads of keys (nil for none).
func (p *planner) payloads(ctx context.Context, ks []string) ([][]byte, error) {
	out := make([][]byte, len(ks))
	for shard, idx := range p.byShard(ks) {
		sks := pick(ks, idx)
		for from := 0; from < len(sks); from += planChunk {
			chunk := sks[from:min(from+planChunk, len(sks))]
			cctx, cancel := context.WithTimeout(ctx, loopCallTimeout)
			vals, err := readPayloads(cctx, p.n.rdb, p.n.partsOrSelf()[shard].lay, chunk)
			cancel()
			if err != nil {
				return nil, fmt.Errorf("pool: schedule: reading payloads: %w", err)
			}
			for j, v := range vals {
				out[idx[from+j]] = v
			}
		}
	}
	return out, nil
}

// ours lists the keys the schedule noted, in every shard.
func (p *planner) ours(ctx context.Context) ([]string, error) {
	var out []string
	for _, part := range p.n.partsOrSelf() {
		iter := p.n.rdb.HScan(ctx, part.lay.planKeys(p.name), 0, "", 1000).Iterator()
		for i := 0; iter.Next(ctx); i++ {
			if i%2 == 0 {
				out = append(out, iter.Val())
			}
		}
		if err := iter.Err(); err != nil {
			return nil, fmt.Errorf("pool: schedule: reading its keys: %w", err)
		}
	}
	return out, nil
}

// note records keys as the schedule's (set: key, digest pairs) and
// forgets others, each in its shard, fenced there.
func (p *planner) note(ctx context.Context, set, forget []string) error {
	parts := p.n.partsOrSelf()
	if len(parts) == 1 {
		return p.noteIn(ctx, p.n, set, forget)
	}
	sets := make([][]string, len(parts))
	for i := 0; i+1 < len(set); i += 2 {
		s := shardOfKey(set[i], len(parts))
		sets[s] = append(sets[s], set[i], set[i+1])
	}
	forgets := make([][]string, len(parts))
	for _, k := range forget {
		s := shardOfKey(k, len(parts))
		forgets[s] = append(forgets[s], k)
	}
	for i, part := range parts {
		if err := p.noteIn(ctx, part, sets[i], forgets[i]); err != nil {
			return err
		}
	}
	return nil
}

// noteIn is note in the shard of part.
func (p *planner) noteIn(ctx context.Context, part *Node, set, forget []string) error {
	f := p.fenceOf(part.shard)
	for len(set) > 0 || len(forget) > 0 {
		s := set[:min(2*planChunk, len(set))]
		d := forget[:min(planChunk, len(forget))]
		set, forget = set[len(s):], forget[len(d):]
		args := []any{f.token, len(s)}
		for _, v := range s {
			args = append(args, v)
		}
		for _, v := range d {
			args = append(args, v)
		}
		cctx, cancel := context.WithTimeout(ctx, loopCallTimeout)
		res, err := part.run(cctx, notePlanScript, "schedule notes", []string{f.key, part.lay.planKeys(p.name)}, args...)
		cancel()
		if err != nil {
			return err
		}
		if res != int64(1) {
			return errFenced
		}
	}
	return nil
}

// notePlanScript notes keys as the schedule's and forgets others.
//
//	KEYS[1] plan:NAME, KEYS[2] plankeys:NAME
//	ARGV[1] token, ARGV[2] n, ARGV[3..2+n] key, digest pairs to note,
//	ARGV[3+n..] keys to forget
//
// Returns 1, or 0 when fenced.
var notePlanScript = redis.NewScript(member.LuaClock + member.LuaTokenFence + `
if token_fenced(KEYS[1], ARGV[1]) then return 0 end
local n = tonumber(ARGV[2])
if n > 0 then redis.call("HSET", KEYS[2], unpack(ARGV, 3, 2 + n)) end
if #ARGV > 2 + n then redis.call("HDEL", KEYS[2], unpack(ARGV, 3 + n)) end
return 1
`)
