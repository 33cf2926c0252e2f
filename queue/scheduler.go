package queue

import (
	"context"
	"fmt"
	"sort"
	"strconv"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/shepherd-go/shepherd/internal/backoff"
	"github.com/shepherd-go/shepherd/internal/group"
	"github.com/shepherd-go/shepherd/internal/script"
)

// The scheduler of a serving process: every Server runs one (started by
// ServeWith, stopped by Stop), and every one of them sends every tick;
// tickScript lets the first through and refuses the others, so each tick
// is enqueued once across the cluster (docs/ARCHITECTURE.md, invariants:
// 13). On a queue of many shards it reads the schedules of every shard
// and ticks each in its own (its ticks' tasks are in that shard). Ticks
// are computed in Redis's clock: the scheduler keeps Redis's
// TIME as of a local monotonic instant, measured at each reload and
// each tick call.
const (
	// schedReload is how often the scheduler reads the schedules
	// without a notice (a lost pub/sub message): one HGETALL a shard, of
	// a missing key for a queue without schedules.
	schedReload = 5 * time.Second
	// schedGap is the least time between two tick calls: the ticks that
	// come due meanwhile go in one call (the lateness it adds is at most
	// schedGap).
	schedGap = 10 * time.Millisecond
	// schedReloadGap is the least time between two reads of the
	// schedules: a burst of SetSchedule calls costs a read every
	// schedReloadGap, not one per call.
	schedReloadGap = 100 * time.Millisecond
	// maxTickBatch bounds the ticks of one tick call.
	maxTickBatch = 512
)

type scheduler struct {
	q       *Queue
	changed chan struct{} // capacity 1: a schedule was set or removed
	grp     *group.Group  // its loop
	scheds  map[schedKey]*schedState

	// Redis's clock: redisAt was Redis's time at the local instant mono.
	redisAt, mono time.Time
}

// schedKey names a schedule in its shard: on a queue of many shards a
// schedule lives in one, but two hold it for a moment while SetSchedule
// moves it (schedule_edit.go), and each is ticked in its own shard.
type schedKey struct {
	shard int
	name  string
}

// schedState is what the scheduler knows of one schedule.
type schedState struct {
	lay           layout // its shard's
	name, version string
	spec          tickSpec
	catchUp       int
	last          time.Time // the last tick handled, as far as this process knows
	next          time.Time // spec.next(last); zero when none
}

// newScheduler makes the scheduler of a server, not started yet: a notice
// (notify) that comes before start is kept.
func newScheduler(q *Queue) *scheduler {
	return &scheduler{q: q, changed: make(chan struct{}, 1), grp: group.New(context.Background()), scheds: map[schedKey]*schedState{}}
}

// start starts the scheduler's loop.
func (sc *scheduler) start() { sc.grp.Go(sc.run) }

// stop stops the scheduler and waits for it. It is idempotent.
func (sc *scheduler) stop() {
	sc.grp.Stop()
	sc.grp.Wait()
}

// notify tells the scheduler that a schedule was set or removed.
func (sc *scheduler) notify() {
	select {
	case sc.changed <- struct{}{}:
	default:
	}
}

func (sc *scheduler) redisNow() time.Time { return sc.redisAt.Add(time.Since(sc.mono)) }

// clock records Redis's time t as read by a call sent at sent and
// answered now: t is taken for the middle of the round trip.
func (sc *scheduler) clock(t time.Time, sent time.Time) {
	sc.redisAt, sc.mono = t, sent.Add(time.Since(sent)/2)
}

// run reads the schedules, sends the ticks due and sleeps until the next
// one, a notice, or schedReload. A failed call is retried after a
// backoff; nothing loops faster than schedGap.
func (sc *scheduler) run() {
	ctx := sc.grp.Context()
	bo := backoff.Backoff{Min: 100 * time.Millisecond, Max: 5 * time.Second}
	timer := time.NewTimer(time.Hour)
	defer timer.Stop()
	var loaded, called time.Time
	reload := true
	for {
		var err error
		if (reload && time.Since(loaded) >= schedReloadGap) || time.Since(loaded) >= schedReload {
			if err = sc.load(ctx); err == nil {
				loaded, reload = time.Now(), false
			}
		}
		if err == nil && len(sc.scheds) > 0 {
			if due := sc.due(); len(due) > 0 {
				called = time.Now()
				var gone bool
				gone, err = sc.tick(ctx, due)
				reload = reload || gone
			}
		}
		wait := time.Until(loaded.Add(schedReload))
		if err != nil {
			if ctx.Err() != nil {
				return
			}
			sc.q.logger.Warn("scheduler: a call failed; trying again", "error", err)
			wait = bo.Next()
		} else {
			bo.Reset()
			now := sc.redisNow()
			for _, s := range sc.scheds {
				if !s.next.IsZero() {
					wait = min(wait, s.next.Sub(now))
				}
			}
			wait = max(wait, time.Until(called.Add(schedGap)), 0)
			if reload {
				wait = min(wait, max(time.Until(loaded.Add(schedReloadGap)), 0))
			}
		}
		timer.Reset(wait)
		select {
		case <-ctx.Done():
			return
		case <-sc.changed:
			reload = true // timer.Reset discards a tick not received (Go 1.23)
		case <-timer.C:
		}
	}
}

// load reads Redis's clock and the schedules' versions of every shard,
// and the definitions of those that are new or changed.
func (sc *scheduler) load(ctx context.Context) error {
	cctx, cancel := context.WithTimeout(ctx, loopCallTimeout)
	defer cancel()
	all := sc.q.known()
	sent := time.Now()
	pipe := sc.q.rdb.Pipeline()
	tm := pipe.Time(cctx)
	held := make([]*redis.MapStringStringCmd, len(all))
	for i, l := range all {
		held[i] = pipe.HGetAll(cctx, l.schedules)
	}
	if _, err := pipe.Exec(cctx); err != nil {
		return err
	}
	sc.clock(tm.Val(), sent)
	versions := map[schedKey]string{}
	for i, c := range held {
		for name, v := range c.Val() {
			versions[schedKey{all[i].shard, name}] = v
		}
	}
	for k, s := range sc.scheds {
		if versions[k] != s.version {
			delete(sc.scheds, k)
		}
	}
	var fetch []schedKey
	for k := range versions {
		if sc.scheds[k] == nil {
			fetch = append(fetch, k)
		}
	}
	if len(fetch) == 0 {
		return nil
	}
	pipe = sc.q.rdb.Pipeline()
	cmds := make([]*redis.SliceCmd, len(fetch))
	for i, k := range fetch {
		cmds[i] = pipe.HMGet(cctx, all[k.shard].schedule(k.name), schedVersion, schedSpec, schedTZ, schedCreated, schedLast, schedCatchUp)
	}
	if _, err := pipe.Exec(cctx); err != nil && err != redis.Nil {
		return err
	}
	for i, k := range fetch {
		f := make([]string, 6)
		for j, v := range cmds[i].Val() {
			f[j], _ = v.(string)
		}
		if f[0] != versions[k] {
			continue // changed meanwhile: its notice follows
		}
		num := func(s string) int64 { n, _ := strconv.ParseInt(s, 10, 64); return n }
		spec, err := parseSpec(f[1], f[2], time.UnixMilli(num(f[3])))
		if err != nil {
			// Valid where it was set (SetSchedule checks), not here: a
			// time zone this machine's database lacks.
			sc.q.logger.Error("scheduler: cannot read a schedule; other processes may run it", "schedule", k.name, "error", err)
			continue
		}
		s := &schedState{lay: all[k.shard], name: k.name, version: f[0], spec: spec, catchUp: int(num(f[5])), last: time.UnixMilli(num(f[4]))}
		s.next = spec.next(s.last)
		sc.scheds[k] = s
	}
	return nil
}

// dueSched is a schedule with the ticks to send for it.
type dueSched struct {
	s     *schedState
	ticks []time.Time
}

// due returns the schedules with ticks due by Redis's clock.
func (sc *scheduler) due() []dueSched {
	now := sc.redisNow()
	var out []dueSched
	for _, s := range sc.scheds {
		if s.next.IsZero() || s.next.After(now) {
			continue
		}
		if ticks := s.spec.dueTicks(s.last, now, s.catchUp); len(ticks) > 0 {
			out = append(out, dueSched{s, ticks})
		}
	}
	return out
}

// tick sends the due ticks, shard by shard, in calls of at most
// maxTickBatch ticks (a call runs on one shard's keys), and learns each
// schedule's last tick from the replies. It reports whether a schedule
// was replaced or removed meanwhile.
func (sc *scheduler) tick(ctx context.Context, due []dueSched) (gone bool, err error) {
	sort.SliceStable(due, func(i, j int) bool { return due[i].s.lay.shard < due[j].s.lay.shard })
	for len(due) > 0 {
		n, ticks := 0, 0
		for n < len(due) && due[n].s.lay.shard == due[0].s.lay.shard && (n == 0 || ticks+len(due[n].ticks) <= maxTickBatch) {
			ticks += len(due[n].ticks)
			n++
		}
		g, err := sc.tickBatch(ctx, due[0].s.lay, due[:n])
		if err != nil {
			return gone, err
		}
		gone = gone || g
		due = due[n:]
	}
	return gone, nil
}

// tickBatch sends the due ticks of schedules of the shard l in one call.
// A tick's task id is tickID's, after the shard on a queue of many
// shards (shardIDPrefix), so that the id names where the task is.
func (sc *scheduler) tickBatch(ctx context.Context, l layout, due []dueSched) (gone bool, err error) {
	q := sc.q
	prefix := shardIDPrefix(l.shard, len(q.known()))
	args := l.commonArgs(q.proc, l.schedulePrefix, tickGrace.Milliseconds())
	for _, d := range due {
		args = append(args, d.s.name, d.s.version, len(d.ticks))
		for _, t := range d.ticks {
			args = append(args, t.UnixMilli(), prefix+tickID(d.s.name, t))
		}
	}
	cctx, cancel := context.WithTimeout(ctx, loopCallTimeout)
	defer cancel()
	sent := time.Now()
	res, err := script.Run(cctx, q.rdb, tickScript, "queue: tick", l.common(), args...)
	if err != nil {
		return false, err
	}
	out, _ := res.([]any)
	if len(out) != 1+len(due) {
		return false, fmt.Errorf("queue: tick: unexpected reply %v", res)
	}
	t, _ := out[0].(int64)
	sc.clock(time.UnixMilli(t), sent)
	for i, d := range due {
		r, _ := out[1+i].([]any)
		if len(r) != 2 {
			delete(sc.scheds, schedKey{l.shard, d.s.name})
			gone = true
			continue
		}
		last, _ := r[0].(int64)
		d.s.last = time.UnixMilli(last)
		d.s.next = d.s.spec.next(d.s.last)
		switch res := TickResult(r[1].(string)); res {
		case TickFull, TickNoTenant, TickDuplicate:
			q.logger.Warn("scheduler: a tick's task was refused", "schedule", d.s.name, "tick", d.s.last, "result", string(res))
		case TickMissed:
			q.logger.Info("scheduler: ticks missed (no process enqueued them in time)", "schedule", d.s.name, "up_to", d.s.last)
		}
	}
	return gone, nil
}

// tickScript enqueues the ticks of a batch of schedules, each tick once:
// a schedule's last tick handled (its "last" field) only grows, and a
// tick is handled only if it is after it, not after Redis's now, and the
// schedule still has the version the ticks were computed from. A tick
// more than the grace late is missed: of a call's missed ticks of a
// schedule, the catch-up most recent run and the others are skipped. A
// tick of a schedule WithNoOverlap whose last task is unfinished is
// skipped. Each task is queued with queueTask, as a Submit's.
//
//	ARGV[4] process, ARGV[5] schedule key prefix, ARGV[6] grace (ms),
//	then per schedule: name, version, n, then n ticks ascending, each
//	its time (ms) and task id
//
// Returns {Redis now (ms), then per schedule {its last tick (ms), what
// became of it ("" when this call handled no tick)}, or "GONE" (replaced
// or removed)}.
var tickScript = redis.NewScript(prelude + submitFn + `
local t = now()
local grace = tonumber(ARGV[6])
local limit = tonumber(redis.call('HGET', K_SETTINGS, '` + settingMaxQueued + `') or '0')
local function unfinished(id)
  return rec(id) and true or false
end
local refusal = {FULL = 'full', UNKNOWN = 'no-tenant', DUP = 'duplicate'}
local out = {t}
local i = 7
while i <= #ARGV do
  local name, v, n = ARGV[i], ARGV[i + 1], tonumber(ARGV[i + 2])
  local first, stop = i + 3, i + 2 + 2 * n
  i = stop + 1
  local sk = ARGV[5] .. name
  local f = redis.call('HMGET', sk, 'v', 'last', 'cu', 'no', 'lid')
  local o -- the tasks' payload and options, read for the first tick to enqueue
  if f[1] ~= v then
    out[#out + 1] = 'GONE'
  else
    local last, cu, lid = tonumber(f[2]), tonumber(f[3]), f[5]
    local missed = 0 -- missed ticks of this call not looked at yet
    for j = first, stop, 2 do
      local tick = tonumber(ARGV[j])
      if tick > last and tick <= t and t - tick > grace then missed = missed + 1 end
    end
    local res, lrun = nil, nil
    for j = first, stop, 2 do
      local tick, id = tonumber(ARGV[j]), ARGV[j + 1]
      if tick > last and tick <= t then
        local late = t - tick > grace
        if late then missed = missed - 1 end
        if late and missed >= cu then
          res = 'missed'
        elseif f[4] == '1' and lid and unfinished(lid) then
          res = 'overlap'
        else
          o = o or redis.call('HMGET', sk, 'p', 'max', 'to', 'ret', 'ten', 'pri')
          local r = queueTask(t, ARGV[4], limit, id, o[1], o[2], o[3], 0, o[4], 'tick:' .. id, o[5], '', '', tonumber(o[6]), '', 0)
          if r == 'OK' then
            res, lid, lrun = 'queued', id, t
          else
            res = refusal[r] or r
          end
        end
        last = tick
      end
    end
    if res then
      redis.call('HSET', sk, 'last', last, 'lres', res)
      if lrun then redis.call('HSET', sk, 'lid', lid, 'lrun', lrun) end
    end
    out[#out + 1] = {last, res or ''}
  end
end
queued()
return out
`)
