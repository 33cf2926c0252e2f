package queue

import (
	"context"
	"slices"
	"time"

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
	l := q.known()[r.shard]
	q.noteWithdrawal(r.nonce, f.id, time.Time{})
	started := q.withdrawals.Go(func() {
		var res any
		// member.Withdraw bounds each try by the call timeout.
		_, err := member.Withdraw(q.withdrawals.Context(), q.cfg.callTimeout, func(ctx context.Context) error {
			var err error
			res, err = script.Run(ctx, q.rdb, withdrawScript, "queue: withdraw a failed submit", l.common(),
				l.commonArgs(f.id, r.nonce, withdrawnTTL.Milliseconds(), q.proc)...)
			return err
		}, func(tries int, err error) {
			if tries == 1 {
				q.logger.Warn("withdrawing a failed Submit's task failed; retrying", "task", f.id, "error", err)
			}
		})
		switch {
		case err != nil:
			q.logger.Error("a failed Submit's task could not be withdrawn before Close; it may run", "task", f.id, "error", err)
			q.noteWithdrawal(r.nonce, "", time.Time{})
		case res == "CANCELLED":
			q.logger.Warn("a failed Submit's task was taken by a worker before it could be withdrawn; it is cancelled, but may have run", "task", f.id)
			// Its take's reply may reach a worker of this process
			// still: keep it from starting there.
			q.noteWithdrawal(r.nonce, f.id, time.Now().Add(earlyCancelTTL))
		case res == "WITHDRAWN":
			// Deleted, also when a worker of this process took it: that
			// take's reply may reach the worker after this one (each
			// came on its own connection), and must not start it.
			q.noteWithdrawal(r.nonce, f.id, time.Now().Add(earlyCancelTTL))
		default:
			q.noteWithdrawal(r.nonce, "", time.Time{})
		}
	})
	if !started {
		q.noteWithdrawal(r.nonce, "", time.Time{})
		q.logger.Error("a failed Submit's task could not be withdrawn: the Queue is closed; it may run", "task", f.id)
	}
}

// withdrawScript takes back a task whose Submit failed after Redis may
// have received it: it records the Submit's nonce in the withdrawn ledger
// (member.WithdrawnTTL; the ledger expires that long after the last
// withdrawal), so that the Submit is refused if it reaches Redis later;
// a task it queued already is deleted as if never submitted (a batch left
// with no task goes with it), also when a worker of the withdrawing
// process took it (which never starts it: maybeWithdrawn), unless a
// worker of another process took it, which is then cancelled (it may
// have run).
//
//	ARGV[4] id, ARGV[5] the Submit's nonce, ARGV[6] member.WithdrawnTTL
//	(ms), ARGV[7] the withdrawing process ("" for none: a test's)
//
// Returns "ABSENT" (not queued), "WITHDRAWN" or "CANCELLED".
var withdrawScript = redis.NewScript(prelude + finishFn + `
local id, nonce = ARGV[4], ARGV[5]
local t = now()
withdraw_call(K_WITHDRAWN, nonce, t, ARGV[6])
local tk = P_TASK .. id
local r = rec(id)
if not r then
  -- Finished already (it may have run), or never queued.
  local n = redis.call('HMGET', tk, F_STATE, F_NONCE)
  if n[1] and (n[2] or id) == nonce then return 'CANCELLED' end
  return 'ABSENT'
end
if (r[F_NONCE] or id) ~= nonce then return 'ABSENT' end
-- A running task's record says 'waiting' (active says it runs:
-- inFlight), or 'active' when an earlier version took it.
local st, owner = r[F_STATE], nil
if st == 'waiting' or st == 'active' then
  owner = inFlight(id)
  if owner then st = 'active' end
end
local mine = owner and ARGV[7] and ARGV[7] ~= '' and owner == ARGV[7]
if st == 'waiting' or st == 'delayed' or st == 'retry' or mine then
  local ten, b, ret = r[F_TENANT] or '', r[F_BATCH], r[F_RETENTION] or '` + defaultRetentionField + `'
  if st == 'waiting' then unready(ten, id, tonumber(r[F_PRIORITY] or '0')) end
  if mine then
    -- Taken by this process's own worker, which does not start it.
    redis.call('HDEL', K_ACTIVE, id)
    redis.call('SREM', P_INFLIGHT .. owner, id)
    unload(ten, 1)
  end
  -- Never queued: its deduplication key is free again.
  local dk = r[F_DEDUP_KEY] and string.sub(P_TASK, 1, -6) .. 'dedup:' .. r[F_DEDUP_KEY]
  if dk and redis.call('GET', dk) == id then redis.call('DEL', dk) end
  if b and b ~= '' then
    -- Never part of its batch. A batch left with no task goes; one
    -- whose other tasks have all finished is kept as long as an outcome
    -- (as finish does when its last task finishes).
    local bk, bt = P_BATCH .. b, P_BTASKS .. b
    redis.call('LREM', bt, 1, id)
    local n = redis.call('HINCRBY', bk, 'n', -1)
    if n <= 0 then
      redis.call('DEL', bk, bt)
    elseif tonumber(redis.call('HGET', bk, 'done') or '0') >= n then
      redis.call('PEXPIRE', bk, ret)
      redis.call('PEXPIRE', bt, ret)
    end
  end
  redis.call('ZREM', K_DELAYED, id)
  redis.call('ZREM', K_RETRY, id)
  redis.call('ZREM', P_TDELAYED .. ten, id)
  redis.call('ZREM', P_TRETRY .. ten, id)
  if recOwn[id] then redis.call('DEL', tk) end
  recDrop(id)
  recSave()
  uncount(1)
  if ten ~= '' then
    lower('n:' .. ten, 1)
    settle(ten)
  end
  return 'WITHDRAWN'
end
if owner then
  recSet(id, 'cx', '1')
  recSave()
  redis.call(PUBLISH, P_CHAN .. 'cancel:' .. owner, id)
end
return 'CANCELLED'
`)

// A pendingWithdrawal is a failed Submit of this process: its task id,
// and until when it is kept once settled (zero while it is withdrawn).
type pendingWithdrawal struct {
	id    string
	until time.Time
}

// noteWithdrawal records the failed Submit nonce of task id (until: zero
// while its withdrawal runs), or forgets it (id ""). Settled ones past
// their time go too.
func (q *Queue) noteWithdrawal(nonce, id string, until time.Time) {
	q.mu.Lock()
	defer q.mu.Unlock()
	now := time.Now()
	for n, w := range q.withdrawing {
		if !w.until.IsZero() && now.After(w.until) {
			delete(q.withdrawing, n)
		}
	}
	defer func() { q.nWithdrawing.Store(int64(len(q.withdrawing))) }()
	if id == "" {
		delete(q.withdrawing, nonce)
		return
	}
	if q.withdrawing == nil {
		q.withdrawing = make(map[string]pendingWithdrawal)
	}
	q.withdrawing[nonce] = pendingWithdrawal{id: id, until: until}
}

// maybeWithdrawn reports whether task id, taken by this process, is the
// task of one of its own failed Submits, withdrawn or being withdrawn: a
// worker must not start it. A frozen Redis may run the Submit, then a
// take of this process, and only then the withdrawal (each came on its
// own connection); the withdrawal then cancels the task, but the take's
// reply is already on its way. Without failed Submits of id, it asks
// Redis nothing; with some, it reads the task's nonce (the Submit that
// queued it), and says no when Redis does not answer; a task Redis no
// longer has is not started (its withdrawal deleted it).
func (q *Queue) maybeWithdrawn(ctx context.Context, shard int, id string) bool {
	if q.nWithdrawing.Load() == 0 {
		return false
	}
	q.mu.Lock()
	var nonces []string
	for n, w := range q.withdrawing {
		if w.id == id {
			nonces = append(nonces, n)
		}
	}
	q.mu.Unlock()
	if len(nonces) == 0 {
		return false
	}
	cctx, cancel := redisutil.CallContext(ctx, q.cfg.callTimeout)
	defer cancel()
	v, err := readTaskNow(cctx, q.rdb, q.known()[shard], id, fieldState, fieldNonce)
	if err != nil || len(v) != 2 {
		return false
	}
	if v[0] == nil {
		return true // deleted: withdrawn after the take
	}
	nonce, ok := v[1].(string)
	if !ok {
		nonce = id // absent: the id is the nonce (wire.go)
	}
	return slices.Contains(nonces, nonce)
}
