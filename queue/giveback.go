package queue

import (
	"context"
	"errors"

	"github.com/redis/go-redis/v9"

	"github.com/shepherd-go/shepherd/internal/script"
)

// giveBack runs deregisterScript on every shard at once (see there): it
// gives back all the tasks the process does not run, and deregisters it
// with remove. A shard that does not answer holds back no other's, and
// once ctx ends it no longer waits for it: go-redis may not give up a
// call to a frozen server at the deadline (a new connection's handshake
// waits for it), and the call ends, in the background, when the server
// answers or the client closes.
func (q *Queue) giveBack(ctx context.Context, remove bool) (int64, error) {
	all := q.known()
	type answer struct {
		n   int64
		err error
	}
	answers := make(chan answer, len(all))
	for _, l := range all {
		go func() {
			n, err := q.giveBackShard(ctx, l, remove)
			answers <- answer{n, err}
		}()
	}
	var sum int64
	var errs []error
	for range all {
		select {
		case a := <-answers:
			sum += a.n
			if a.err != nil {
				errs = append(errs, a.err)
			}
		case <-ctx.Done():
			return sum, errors.Join(append(errs, ctx.Err())...)
		}
	}
	return sum, errors.Join(errs...)
}

// giveBackShard runs deregisterScript on shard l: with ids, it gives
// back those only.
func (q *Queue) giveBackShard(ctx context.Context, l layout, remove bool, ids ...string) (int64, error) {
	flag := "0"
	if remove {
		flag = "1"
	}
	args := l.commonArgs(q.proc, flag)
	for _, id := range ids {
		args = append(args, id)
	}
	res, err := script.Run(ctx, q.rdb, deregisterScript, "queue: give back tasks", l.common(l.inflight(q.proc), l.drains), args...)
	n, _ := res.(int64)
	return n, err
}

// checkOrphans gives back the tasks that Redis marks in flight on this
// process but that it does not run: a dequeue whose reply was lost (the
// connection dropped after Redis ran the script) would otherwise hold
// them for as long as the process lives. An id must be seen so on two
// checks in a row (TTL/3 apart), so that a dequeue whose reply is on
// its way is not taken for one.
func (s *Server) checkOrphans(ctx context.Context) {
	for _, l := range s.q.known() {
		s.checkShardOrphans(ctx, l)
	}
}

// checkShardOrphans is checkOrphans in shard l.
func (s *Server) checkShardOrphans(ctx context.Context, l layout) {
	q := s.q
	ids, err := q.rdb.SMembers(ctx, l.inflight(q.proc)).Result()
	if err != nil {
		return
	}
	var orphans []string
	s.mu.Lock()
	next := make(map[string]bool)
	for _, id := range ids {
		if s.running[id] != nil {
			continue
		}
		if s.suspect[l.shard][id] {
			orphans = append(orphans, id)
		} else {
			next[id] = true
		}
	}
	s.suspect[l.shard] = next
	s.mu.Unlock()
	if len(orphans) == 0 {
		return
	}
	n, err := q.giveBackShard(ctx, l, false, orphans...)
	if err != nil {
		q.logger.Warn("giving back tasks this process does not run failed", "error", err)
		return
	}
	q.logger.Warn("gave back tasks marked as running here that this process never got (a lost reply)", "tasks", n)
}

// deregisterScript gives back a process's tasks still marked in flight
// that it does not run: all of them once it runs none (a stopped server
// whose outcomes could not be recorded), or the ids listed (tasks whose
// dequeue reply was lost). They go back to ready at once without using
// an attempt. With ARGV[5] "1" it also removes the process (Close) and
// its drain request.
//
//	KEYS[17] the process's inflight set, KEYS[18] drains
//	ARGV[4] process, ARGV[5] "1" to remove it, ARGV[6...] ids (none: all)
//
// Returns how many tasks went back.
var deregisterScript = redis.NewScript(prelude + finishFn + `
local ids = {}
for i = 6, #ARGV do ids[#ids + 1] = ARGV[i] end
local all = #ids == 0
if all then ids = redis.call('SMEMBERS', KEYS[17]) end
local back = 0
for _, id in ipairs(ids) do
  local tk = P_TASK .. id
  local p, att, began, _, _, _, ten = inFlight(id)
  if p == ARGV[4] then
    redis.call('HDEL', K_ACTIVE, id)
    -- Its hash holds the attempts before this one (inFlight), unless an
    -- earlier version took it.
    if began == false then recSet(id, 'own', nil, 'att', tonumber(att) - 1) end
    readyAgain(ten, id)
    unload(ten, 1)
    back = back + 1
  end
  redis.call('SREM', KEYS[17], id)
end
recSave()
if ARGV[5] == '1' then
  redis.call('HDEL', K_ALIVE, ARGV[4])
  redis.call('HDEL', K_PROCS, ARGV[4])
  redis.call('SREM', K_IDLE, ARGV[4])
  redis.call('HDEL', KEYS[18], ARGV[4])
  releaseHolds({ARGV[4]})
end
if back > 0 then wake() end
return back
`)

// owe notes, per shard, the ids of tasks a stopped server could not give
// back (Redis did not answer its Stop): the keep-alive gives them back
// once their shard answers again (giveBackOwed). Without it they would
// stay marked in flight on this live process, which runs them no more,
// until it closes.
func (q *Queue) owe(ids map[int][]string) {
	q.mu.Lock()
	defer q.mu.Unlock()
	for shard, list := range ids {
		if q.owed == nil {
			q.owed = make(map[int][]string)
		}
		q.owed[shard] = append(q.owed[shard], list...)
	}
}

// giveBackOwed gives back the owed ids (owe) of the shards of all that
// answered. An id no longer marked in flight here (reaped meanwhile) is
// only forgotten.
func (q *Queue) giveBackOwed(ctx context.Context, all []layout, answered func(int) bool) {
	q.mu.Lock()
	todo := make(map[int][]string)
	for shard, ids := range q.owed {
		if shard < len(all) && answered(shard) {
			todo[shard] = ids
			delete(q.owed, shard)
		}
	}
	q.mu.Unlock()
	for shard, ids := range todo {
		n, err := q.giveBackShard(ctx, all[shard], false, ids...)
		if err != nil {
			q.owe(map[int][]string{shard: ids})
			continue
		}
		if n > 0 {
			q.logger.Info("gave back tasks whose ends a stopped server could not record", "tasks", n, "shard", shard)
		}
	}
}
