package queue

import (
	"context"
	"encoding/json"
	"os"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/shepherd-go/shepherd/internal/member"
	"github.com/shepherd-go/shepherd/internal/script"
)

// keepAliveLoop extends the process's lease every TTL/3, and at once when
// kicked (member.KeepAlive). When the queue
// declared the process dead meanwhile (it was paused or cut off for
// longer than the TTL), its tasks in flight already went to others: it
// abandons them (their late outcomes would be refused) and registers
// again.
func (q *Queue) keepAliveLoop() {
	// A beat that a shard did not answer is tried again soon
	// (member.KeepAliveRetry), not a period later.
	member.KeepAlive(q.tasks.Context(), q.cfg.ttl/3, q.kick, q.keepAlive)
}

// keepAlive sends one keep-alive (keepAliveScript) to every shard, with
// the process's record to the home shard, and acts on the answers: a
// drain request switches the server to drain; GONE (declared dead:
// member.Revived, or Redis lost the queue: member.Lost) abandons the
// tasks in flight and registers again, in the shards that said so (all
// of them when the home shard did). It reports whether every shard
// answered.
func (q *Queue) keepAlive(ctx context.Context) (ok bool) {
	cctx, cancel := context.WithTimeout(ctx, loopCallTimeout)
	defer cancel()
	s := q.current()
	var serial int64
	if s != nil {
		serial = s.serial
	}
	// The home shard holds the record and the drain requests; every
	// other shard the keep-alive only. Each shard's lease is its own, and
	// the shards are kept alive at once: one that does not answer holds
	// back only its own tasks (leaseSure), not the others' keep-alives.
	// Gone from the home shard, the process registers again in all; gone
	// from others only, it joins those again (rejoinShards).
	all := q.known()
	type answer struct {
		res any
		err error
	}
	answers := make([]answer, len(all))
	record := q.record(s)
	keep := func(i int) {
		l := all[i]
		rec := ""
		if i == 0 {
			rec = record
		}
		sentHere := time.Since(q.started)
		r, err := script.Run(cctx, q.rdb, keepAliveScript, "queue: keep alive", l.common(l.drains),
			l.commonArgs(q.proc, q.cfg.ttl.Milliseconds(), rec, serial, q.drained)...)
		answers[i] = answer{r, err}
		if err == nil && r != "GONE" {
			q.leases[i].Store(int64(sentHere))
		}
	}
	if len(all) == 1 {
		keep(0)
	} else {
		var wg sync.WaitGroup
		for i := range all {
			wg.Add(1)
			go func() {
				defer wg.Done()
				keep(i)
			}()
		}
		wg.Wait()
	}
	q.giveBackOwed(cctx, all, func(i int) bool { return answers[i].err == nil })
	var res any
	failed := false
	var gone []int // the shards other than the home one that declared the process dead
	for i, a := range answers {
		switch {
		case a.err != nil:
			if ctx.Err() == nil {
				q.logger.Warn("keep-alive failed", "error", a.err, "shard", i)
			}
			failed = true
		case a.res == "GONE" && i > 0:
			gone = append(gone, i)
		case i == 0:
			res = a.res
		}
	}
	ok = !failed
	if res != "GONE" && len(gone) > 0 {
		// Declared dead in some shards only (cut off from them for
		// longer than the TTL): their tasks in flight ran elsewhere; the
		// process abandons those and joins those shards again, and goes
		// on with the others.
		q.rejoinShards(cctx, s, gone)
		return
	}
	if failed && res != "GONE" {
		return
	}
	if res != "GONE" {
		if res == "DRAIN" && s != nil {
			q.drained = serial
			// A server that stopped meanwhile says ErrStopped: nothing
			// left to drain. SetMode publishes the mode, which tells
			// Redis the request was applied.
			if s.SetMode(ModeDrain) == nil {
				q.logger.Info("draining: asked by an operator (Client.Drain)")
			}
			q.kickKeepAlive()
		}
		if s != nil {
			s.checkOrphans(cctx)
		}
		return
	}
	s = q.current()
	lost := 0
	if s != nil {
		lost = s.abandon(nil)
	}
	fresh, err := q.register(cctx, true)
	if err != nil {
		q.logger.Warn("registering again failed", "error", err)
		return false // tried again soon
	}
	q.m.revived.Add(ctx, 1, q.m.attrs)
	if fresh { // member.Lost
		q.logger.Error("queue state lost (Redis restarted empty): unfinished tasks and outcomes are gone", "abandoned", lost)
		q.m.stateLost.Add(ctx, 1, q.m.attrs)
		return
	}
	// member.Revived
	q.logger.Warn("this process was declared dead (paused or cut off for longer than the TTL); its tasks in flight ran elsewhere and their late outcomes are dropped",
		"abandoned", lost, "ttl", q.cfg.ttl)
	return ok
}

// leaseSure reports whether this process's lease in shard surely still
// runs: its last keep-alive that shard accepted was sent less than 2/3 of
// the TTL ago (they go every TTL/3). After a pause, or while the shard's
// Redis does not answer, it is not: the process may have been declared
// dead there and its tasks given to others.
func (q *Queue) leaseSure(shard int) bool {
	return time.Since(q.started)-time.Duration(q.leases[shard].Load()) < q.cfg.ttl*2/3
}

// procRecord describes a process for operators (Stats).
type procRecord struct {
	Host    string `json:"host"`
	PID     int    `json:"pid"`
	Name    string `json:"name,omitempty"` // WithName's
	Started int64  `json:"started"`        // ms, this process's clock
	Workers int    `json:"workers"`
	Busy    int    `json:"busy"`
	Limit   int    `json:"limit,omitempty"` // the concurrency limit (WithConcurrencyLimit, WithLimit)
	Part    string `json:"part,omitempty"`  // WithLimit's partition
	Drops   int64  `json:"drops,omitempty"` // attempts that counted as drops for the limit
	Mode    string `json:"mode,omitempty"`  // the server's Mode, "" without one
	Serial  int64  `json:"srv,omitempty"`   // the server's serial, 0 without one (drainScript reads it)
	// P50, P90, P99 (µs) of its last Sampled handler run times.
	P50     int64 `json:"p50,omitempty"`
	P90     int64 `json:"p90,omitempty"`
	P99     int64 `json:"p99,omitempty"`
	Sampled int   `json:"took,omitempty"`
}

// record describes the process serving with s (nil: not serving).
func (q *Queue) record(s *Server) string {
	host, _ := os.Hostname()
	r := procRecord{Host: host, PID: os.Getpid(), Name: q.cfg.name, Started: q.started.UnixMilli()}
	if s != nil {
		r.Workers, r.Busy = s.size(), s.busyCount()
		r.Mode, r.Serial = s.Mode().String(), s.serial
		p50, p90, p99, n := s.took.percentiles()
		r.P50, r.P90, r.P99, r.Sampled = p50.Microseconds(), p90.Microseconds(), p99.Microseconds(), n
		if s.lim != nil {
			r.Limit, r.Part, r.Drops = s.Limit(), s.part.pub, s.Drops()
		}
	}
	b, _ := json.Marshal(r)
	return string(b)
}

// abandon is called when the process was declared dead (in the shards
// of only, or in all: nil): its attempts in flight there belong to others
// now. It cancels those still running and marks them lost (their
// outcomes are not recorded), and reports how many. Attempts that ended
// already are being recorded; those records are refused as late.
func (s *Server) abandon(only map[int]bool) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	n := 0
	for _, r := range s.running {
		if r.finished.Load() || only != nil && !only[r.shard] {
			continue
		}
		r.lost.Store(true)
		r.cancel()
		n++
	}
	return n
}

// keepAliveScript extends a process's lease by ARGV[5] ms and stores its
// record, unless it was declared dead meanwhile. It also answers a drain
// request (drainScript): the process's request stays until the process
// says it applied it, or the server it names is gone, so a lost reply
// does not lose it.
//
//	KEYS[17] drains
//	ARGV[4] process, ARGV[5] ttl (ms), ARGV[6] record (JSON; "" in a
//	shard other than the home one: it keeps none), ARGV[7]
//	the serial of the process's server ("0": none), ARGV[8] the serial
//	whose drain request it applied last ("0": none)
//
// Returns "OK", "DRAIN" (drain the server ARGV[7]) or "GONE".
var keepAliveScript = redis.NewScript(member.LuaKeepAlive + prelude + `
-- Without its settings the queue's state is gone (Redis lost it): join again.
if redis.call('EXISTS', K_SETTINGS) == 0 or not renew(K_ALIVE, ARGV[4], now()) then return 'GONE' end
if ARGV[6] ~= '' then redis.call('HSET', K_PROCS, ARGV[4], ARGV[6]) end
local d = redis.call('HGET', KEYS[17], ARGV[4])
if d then
  if d == ARGV[7] and d ~= ARGV[8] then return 'DRAIN' end
  redis.call('HDEL', KEYS[17], ARGV[4])
end
return 'OK'
`)

// kickKeepAlive makes keepAliveLoop keep alive now.
func (q *Queue) kickKeepAlive() {
	select {
	case q.kick <- struct{}{}:
	default:
	}
}

// rejoinShards joins again the shards (other than the home one) that
// declared the process dead, after abandoning its tasks in flight there;
// a shard that does not answer is joined at a later keep-alive.
func (q *Queue) rejoinShards(ctx context.Context, s *Server, gone []int) {
	only := make(map[int]bool, len(gone))
	for _, i := range gone {
		only[i] = true
	}
	lost := 0
	if s != nil {
		lost = s.abandon(only)
	}
	all := q.known()
	for _, i := range gone {
		fresh, err := q.joinShard(ctx, all[i])
		if err != nil {
			q.logger.Warn("joining a shard again failed", "error", err, "shard", i)
			continue
		}
		q.m.revived.Add(ctx, 1, q.m.attrs)
		if fresh {
			q.logger.Error("queue state lost in a shard (its Redis restarted empty): its unfinished tasks and outcomes are gone", "shard", i, "abandoned", lost)
			q.m.stateLost.Add(ctx, 1, q.m.attrs)
			continue
		}
		q.logger.Warn("this process was declared dead in a shard (cut off from it for longer than the TTL); its tasks in flight there ran elsewhere and their late outcomes are dropped",
			"shard", i, "abandoned", lost, "ttl", q.cfg.ttl)
	}
}
