package queue

import (
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/shepherd-go/shepherd/internal/backoff"
	"github.com/shepherd-go/shepherd/internal/redisutil"
	"github.com/shepherd-go/shepherd/internal/script"
)

// withdrawnTTL is how long a queue remembers a withdrawn Submit: one
// that reaches Redis later than that (held up in a frozen server) is
// queued after all.
const withdrawnTTL = 10 * time.Minute

// withdraw takes back a failed Submit (see withdrawScript), retrying
// until Redis answers or the Queue closes.
func (q *Queue) withdraw(r *submitReq) {
	f := r.f
	started := q.withdrawals.Go(func() {
		ctx := q.withdrawals.Context()
		bo := backoff.Backoff{Min: 100 * time.Millisecond, Max: 2 * time.Second}
		for fails := 0; ; fails++ {
			cctx, cancel := redisutil.CallContext(ctx, q.cfg.callTimeout)
			res, err := script.Run(cctx, q.rdb, withdrawScript, "queue: withdraw a failed submit", q.lay.common(),
				q.lay.commonArgs(f.id, r.nonce, withdrawnTTL.Milliseconds())...)
			cancel()
			if err == nil {
				if res == "CANCELLED" {
					q.logger.Warn("a failed Submit's task was taken by a worker before it could be withdrawn; it is cancelled, but may have run", "task", f.id)
				}
				return
			}
			if ctx.Err() != nil {
				q.logger.Error("a failed Submit's task could not be withdrawn before Close; it may run", "task", f.id, "error", err)
				return
			}
			if fails == 0 {
				q.logger.Warn("withdrawing a failed Submit's task failed; retrying", "task", f.id, "error", err)
			}
			backoff.Sleep(bo.Next(), ctx.Done())
		}
	})
	if !started {
		q.logger.Error("a failed Submit's task could not be withdrawn: the Queue is closed; it may run", "task", f.id)
	}
}

// withdrawScript takes back a task whose Submit failed after Redis may
// have received it: it records the Submit's nonce as withdrawn (kept for
// withdrawnTTL; the withdrawn set expires withdrawnTTL after the last
// withdrawal), so that the Submit is refused if it reaches Redis later;
// a task it queued already is deleted as if never submitted (a batch left
// with no task goes with it), unless a worker took it, which is then
// cancelled (it may have run).
//
//	ARGV[4] id, ARGV[5] the Submit's nonce, ARGV[6] withdrawnTTL (ms)
//
// Returns "ABSENT" (not queued), "WITHDRAWN" or "CANCELLED".
var withdrawScript = redis.NewScript(prelude + `
local id, nonce = ARGV[4], ARGV[5]
local t = now()
redis.call('ZADD', K_WITHDRAWN, t, nonce)
redis.call('ZREMRANGEBYSCORE', K_WITHDRAWN, '-inf', t - tonumber(ARGV[6]))
-- Every nonce in it is forgotten by then.
redis.call('PEXPIRE', K_WITHDRAWN, ARGV[6])
local tk = P_TASK .. id
local f = redis.call('HMGET', tk, 'st', 'n', 'own', 'ten', 'b', 'ret')
if not f[1] or f[2] ~= nonce then return 'ABSENT' end
if f[1] == 'waiting' or f[1] == 'delayed' or f[1] == 'retry' then
  local ten = f[4] or ''
  if f[1] == 'waiting' then unready(ten, id) end
  if f[5] and f[5] ~= '' then
    -- Never part of its batch. A batch left with no task goes; one
    -- whose other tasks have all finished is kept as long as an outcome
    -- (as finish does when its last task finishes).
    local bk, bt = P_BATCH .. f[5], P_BTASKS .. f[5]
    redis.call('LREM', bt, 1, id)
    local n = redis.call('HINCRBY', bk, 'n', -1)
    if n <= 0 then
      redis.call('DEL', bk, bt)
    elseif tonumber(redis.call('HGET', bk, 'done') or '0') >= n then
      redis.call('PEXPIRE', bk, f[6] or ARGV[6])
      redis.call('PEXPIRE', bt, f[6] or ARGV[6])
    end
  end
  redis.call('ZREM', K_DELAYED, id)
  redis.call('ZREM', K_RETRY, id)
  redis.call('DEL', tk)
  uncount(1)
  if ten ~= '' then
    lower('n:' .. ten, 1)
    settle(ten)
  end
  return 'WITHDRAWN'
end
if f[1] == 'active' then
  redis.call('HSET', tk, 'cx', '1')
  redis.call('PUBLISH', P_CHAN .. 'cancel:' .. f[3], id)
end
return 'CANCELLED'
`)
