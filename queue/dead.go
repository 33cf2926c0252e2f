package queue

import (
	"context"
	"fmt"

	"github.com/redis/go-redis/v9"

	"github.com/shepherd-go/shepherd/internal/script"
)

// DeadLetters lists up to limit dead letters, newest first (in the order
// they died, also within one millisecond), skipping the offset newest. On
// a queue of n shards each shard's offset+limit newest are read (n reads
// in one round trip) and merged by the time they died (to the
// millisecond; within one, a shard's letters keep their order).
func (q *Client) DeadLetters(ctx context.Context, offset, limit int) ([]TaskInfo, error) {
	if offset < 0 || limit < 1 {
		return nil, invalid("dead letters need offset >= 0 and limit >= 1, got %d and %d", offset, limit)
	}
	all, err := q.layouts(ctx)
	if err != nil {
		return nil, err
	}
	var ids []located
	if len(all) == 1 {
		var list []string
		list, err = q.rdb.ZRevRange(ctx, all[0].dead, int64(offset), int64(offset+limit-1)).Result()
		ids = locate(all[0], list)
	} else {
		pipe := q.rdb.Pipeline()
		cmds := make([]*redis.ZSliceCmd, len(all))
		for i, l := range all {
			cmds[i] = pipe.ZRevRangeWithScores(ctx, l.dead, 0, int64(offset+limit-1))
		}
		if _, err = pipe.Exec(ctx); err == nil {
			ids = mergeScored(all, cmds, true, offset, limit)
		}
	}
	if err != nil {
		return nil, fmt.Errorf("queue: dead letters: %w", err)
	}
	return q.infos(ctx, ids, false)
}

// DeleteDead deletes the dead letter id: its record, payload and errors
// are gone, as PurgeDead does for all of them. It returns ErrTaskNotFound
// when id is not a dead letter (a task still unfinished is never deleted
// by it; see Cancel). On a queue of n shards a caller's id is looked for
// in each shard in turn (up to n calls).
func (q *Client) DeleteDead(ctx context.Context, id string) error {
	if err := validID(id); err != nil {
		return err
	}
	all, err := q.layouts(ctx)
	if err != nil {
		return err
	}
	res, err := onShards(idLayouts(all, id), "NOTDEAD", func(l layout) (any, error) {
		return script.Run(ctx, q.rdb, deleteDeadScript, "queue: delete dead letter", l.common(l.task(id)), l.commonArgs(id)...)
	})
	if err != nil {
		return err
	}
	if res == "NOTDEAD" {
		return fmt.Errorf("%w: %q is not a dead letter", ErrTaskNotFound, id)
	}
	return nil
}

// deleteDeadScript deletes one dead letter.
//
//	KEYS[17] task key
//	ARGV[4] id
//
// Returns "OK" or "NOTDEAD".
var deleteDeadScript = redis.NewScript(prelude + `
if redis.call('ZREM', K_DEAD, ARGV[4]) == 0 then return 'NOTDEAD' end
redis.call('DEL', KEYS[17])
return 'OK'
`)

// Replay queues the dead letter id again, with its attempts and errors
// reset, as a new task with the same id and payload. It returns
// ErrTaskNotFound when id is not a dead letter, ErrQueueFull at the
// bound, ErrUnknownTenant when its tenant was removed. The task stays in
// its shard; on a queue of n shards a caller's id is looked for in each
// shard in turn (up to n calls).
func (q *Client) Replay(ctx context.Context, id string) error {
	if err := validID(id); err != nil {
		return err
	}
	all, err := q.layouts(ctx)
	if err != nil {
		return err
	}
	res, err := onShards(idLayouts(all, id), "NOTDEAD", func(l layout) (any, error) {
		return script.Run(ctx, q.rdb, replayScript, "queue: replay", l.common(l.task(id)), l.commonArgs(id)...)
	})
	if err != nil {
		return err
	}
	switch res {
	case "NOTDEAD":
		return fmt.Errorf("%w: %q is not a dead letter", ErrTaskNotFound, id)
	case "FULL":
		return fmt.Errorf("%w: MaxQueued unfinished tasks", ErrQueueFull)
	case "UNKNOWN":
		return fmt.Errorf("%w: task %q's tenant was removed", ErrUnknownTenant, id)
	}
	return nil
}

// replayScript queues a dead letter again, with its attempts and errors
// reset.
//
//	KEYS[17] task key
//	ARGV[4] id
//
// Returns "OK", "NOTDEAD", "FULL" (the queue's max_queued setting) or
// "UNKNOWN" (its tenant is no longer registered).
var replayScript = redis.NewScript(prelude + `
local id = ARGV[4]
if not redis.call('ZSCORE', K_DEAD, id) then return 'NOTDEAD' end
local limit = tonumber(redis.call('HGET', K_SETTINGS, 'max_queued') or '0')
if limit > 0 and tonumber(redis.call('GET', K_COUNT) or '0') >= limit then return 'FULL' end
local ten = redis.call('HGET', KEYS[17], 'ten') or ''
if ten ~= '' and not redis.call('HGET', K_TEN, 'c:' .. ten) then return 'UNKNOWN' end
redis.call('ZREM', K_DEAD, id)
redis.call('INCR', K_COUNT)
if ten ~= '' then redis.call('HINCRBY', K_TEN, 'n:' .. ten, 1) end
-- A new task, out of its batch: a record made from the letter's hash,
-- or that hash itself for a large payload (wire.go, "Records").
local all = redis.call('HGETALL', KEYS[17])
local r = {}
for i = 1, #all, 2 do r[all[i]] = all[i + 1] end
local p = r['p'] or ''
if #p > ` + recordMaxPayloadText + ` then
  redis.call('HDEL', KEYS[17], 'errs', 'fin', 'res', 'cx', 'lerr', 'b', 'att', 'due', 'own', 'beg', 'pg', 'perm')
  redis.call('HSET', KEYS[17], 'st', 'waiting', 'enq', now())
else
  r['errs'], r['fin'], r['res'], r['cx'], r['lerr'], r['b'], r['att'], r['due'], r['own'], r['beg'], r['pg'], r['perm'] = nil
  r['st'], r['enq'], r['p'] = 'waiting', string.format('%d', now()), nil
  redis.call('DEL', KEYS[17])
  recNew(id, r, p)
  recSave()
end
local pri = r['pri']
pushReady(ten, {id}, true, tonumber(pri or '0'))
wake()
return 'OK'
`)

// PurgeDead deletes every dead letter and returns how many (of every
// shard, one shard after the other, 1,000 letters a call). On an error it
// returns how many it deleted before.
func (q *Client) PurgeDead(ctx context.Context) (int, error) {
	all, err := q.layouts(ctx)
	if err != nil {
		return 0, err
	}
	total := 0
	for _, l := range all {
		for {
			res, err := script.Run(ctx, q.rdb, purgeScript, "queue: purge dead letters", l.common(), l.commonArgs(1000)...)
			if err != nil {
				return total, err
			}
			n, _ := res.(int64)
			total += int(n)
			if n == 0 {
				break
			}
		}
	}
	return total, nil
}

// purgeScript deletes up to ARGV[4] of the oldest dead letters.
//
//	ARGV[4] limit
//
// Returns how many it deleted.
var purgeScript = redis.NewScript(prelude + `
local old = redis.call('ZPOPMIN', K_DEAD, tonumber(ARGV[4]))
for i = 1, #old, 2 do redis.call('DEL', P_TASK .. old[i]) end
return #old / 2
`)

// droppedDead logs and counts n dead letters that a script of this
// process dropped at the MaxDeadLetters bound.
func (q *Queue) droppedDead(ctx context.Context, n int64) {
	q.logger.Warn("dead letters dropped at the MaxDeadLetters bound", "dropped", n, "max", q.cfg.maxDead)
	q.m.deadDropped.Add(ctx, n, q.m.attrs)
}

// fileDeadFn is the Lua function of the prelude that files a dead letter.
// The dead set orders the letters by their death: each is scored by the
// time it died (ms, Redis's clock), raised to one above the newest
// letter's when not above it, so that letters that die in the same ms (in
// one script call, or one after the other) keep the order they died in,
// where a tie would fall back to their ids. The score stays in ms so that
// a letter filed by an older process, scored by its time alone, sorts as
// before; DeadLetters, trimming and purging go by this order, and the
// time shown is the task's fin field, never the score.
//
// fileDead(id, t) adds the letter id, which died at t, then drops the
// oldest letters beyond the max_dead setting (their records deleted,
// counted in deaddropped), and returns how many it dropped.
const fileDeadFn = `
local function fileDead(id, t)
  local score = t
  local top = redis.call('ZRANGE', K_DEAD, -1, -1, 'WITHSCORES')
  if top[2] and tonumber(top[2]) >= score then score = tonumber(top[2]) + 1 end
  redis.call('ZADD', K_DEAD, score, id)
  local maxd = tonumber(redis.call('HGET', K_SETTINGS, 'max_dead') or '0')
  if maxd <= 0 then return 0 end
  local over = redis.call('ZCARD', K_DEAD) - maxd
  if over <= 0 then return 0 end
  local old = redis.call('ZPOPMIN', K_DEAD, over)
  for i = 1, #old, 2 do redis.call('DEL', P_TASK .. old[i]) end
  redis.call('INCRBY', K_DROPPED, over)
  return over
end
`
