package queue

import (
	"context"
	"fmt"

	"github.com/redis/go-redis/v9"

	"github.com/shepherd-go/shepherd/internal/script"
)

// DeleteDead deletes the dead letter id: its record, payload and errors
// are gone, as PurgeDead does for all of them. It returns ErrTaskNotFound
// when id is not a dead letter (a task still unfinished is never deleted
// by it; see Cancel).
func (q *Client) DeleteDead(ctx context.Context, id string) error {
	if err := validID(id); err != nil {
		return err
	}
	res, err := script.Run(ctx, q.rdb, deleteDeadScript, "queue: delete dead letter", q.lay.common(q.lay.task(id)), q.lay.commonArgs(id)...)
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

func (q *Queue) droppedDead(ctx context.Context, n int64) {
	q.logger.Warn("dead letters dropped at the MaxDeadLetters bound", "dropped", n, "max", q.cfg.maxDead)
	q.m.deadDropped.Add(ctx, n, q.m.attrs)
}
