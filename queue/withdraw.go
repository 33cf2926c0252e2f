package queue

import (
	"context"

	"github.com/redis/go-redis/v9"

	"github.com/shepherd-go/shepherd/internal/member"
	"github.com/shepherd-go/shepherd/internal/redisutil"
	"github.com/shepherd-go/shepherd/internal/script"
)

// withdrawnTTL is how long a queue remembers a withdrawn Submit: one
// that reaches Redis later than that (held up in a frozen server) is
// queued after all. It is the membership layer's, the same for pools.
const withdrawnTTL = member.WithdrawnTTL

// withdraw takes back a failed Submit (see withdrawScript), retrying
// until Redis answers or the Queue closes (member.Withdraw).
func (q *Queue) withdraw(r *submitReq) {
	f := r.f
	started := q.withdrawals.Go(func() {
		var res any
		_, err := member.Withdraw(q.withdrawals.Context(), q.cfg.callTimeout, func(ctx context.Context) error {
			cctx, cancel := redisutil.CallContext(ctx, q.cfg.callTimeout)
			defer cancel()
			var err error
			res, err = script.Run(cctx, q.rdb, withdrawScript, "queue: withdraw a failed submit", q.lay.common(),
				q.lay.commonArgs(f.id, r.nonce, withdrawnTTL.Milliseconds())...)
			return err
		}, func(tries int, err error) {
			if tries == 1 {
				q.logger.Warn("withdrawing a failed Submit's task failed; retrying", "task", f.id, "error", err)
			}
		})
		switch {
		case err != nil:
			q.logger.Error("a failed Submit's task could not be withdrawn before Close; it may run", "task", f.id, "error", err)
		case res == "CANCELLED":
			q.logger.Warn("a failed Submit's task was taken by a worker before it could be withdrawn; it is cancelled, but may have run", "task", f.id)
		}
	})
	if !started {
		q.logger.Error("a failed Submit's task could not be withdrawn: the Queue is closed; it may run", "task", f.id)
	}
}

// withdrawScript takes back a task whose Submit failed after Redis may
// have received it: it records the Submit's nonce in the withdrawn ledger
// (member.WithdrawnTTL; the ledger expires that long after the last
// withdrawal), so that the Submit is refused if it reaches Redis later;
// a task it queued already is deleted as if never submitted (a batch left
// with no task goes with it), unless a worker took it, which is then
// cancelled (it may have run).
//
//	ARGV[4] id, ARGV[5] the Submit's nonce, ARGV[6] member.WithdrawnTTL (ms)
//
// Returns "ABSENT" (not queued), "WITHDRAWN" or "CANCELLED".
var withdrawScript = redis.NewScript(prelude + `
local id, nonce = ARGV[4], ARGV[5]
local t = now()
withdraw_call(K_WITHDRAWN, nonce, t, ARGV[6])
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
