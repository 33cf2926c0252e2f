package queue

import (
	"context"
	"fmt"

	"github.com/redis/go-redis/v9"

	"github.com/shepherd-go/shepherd/internal/script"
)

// The calls that change a queue's schedules or run one: SetSchedule,
// RemoveSchedule, RunSchedule, and their scripts.

// SetSchedule adds the schedule name, or replaces it, to enqueue a task
// with payload at each tick of spec. The schedule is stored with the
// queue: every serving process runs it, and each tick is enqueued once
// across the cluster (see the package's Periodic tasks).
//
// spec is a cron expression of 5 fields (minute, hour, day of month,
// month, day of week) or 6 (seconds first), in UTC unless WithTimeZone
// says otherwise; a descriptor (@yearly, @monthly, @weekly, @daily,
// @hourly); or an interval "@every D" (D at least a second, as
// time.ParseDuration reads it), whose ticks fall every D from the moment
// the schedule was set, by Redis's clock.
//
// A tick's task has the id "NAME@TIME" (see TickOf; "2~NAME@TIME" on a
// queue of many shards, its shard first), the payload and
// the options given; it is enqueued as its tick comes, by Redis's clock.
// Setting a schedule to the definition it has already changes nothing
// (its ticks go on, an interval keeps its anchor), so every process may
// set its schedules when it starts; any other change replaces it: ticks
// are counted afresh from the replacement, and no tick of the old
// definition is enqueued after it.
//
// On a queue of n shards (WithShards) a schedule lives in the shard of
// its tasks: its tenant's, else the one its name hashes to. SetSchedule
// writes it there and removes it from the shard it was in before (a
// schedule whose tenant changed moves: it counts as replaced), at the
// cost of a read of every shard and, when it moves, a call more.
//
// Errors: ErrInvalidOption (a bad name, spec, time zone or option; a
// name is 1 to MaxScheduleNameSize bytes and does not start with a
// number and "~", as the ids of a sharded queue's ticks do),
// ErrPayloadTooLarge (over DefaultMaxPayloadSize), ErrUnknownTenant (the
// tasks' tenant is not registered). Nothing is written then.
func (q *Client) SetSchedule(ctx context.Context, name, spec string, payload []byte, opts ...ScheduleOption) error {
	c, err := checkSchedule(name, spec, payload, opts)
	if err != nil {
		return err
	}
	noOverlap := ""
	if c.noOverlap {
		noOverlap = "1"
	}
	t := c.task
	all, err := q.layouts(ctx)
	if err != nil {
		return err
	}
	l := scheduleLayout(all, name, t.tenant)
	if len(all) > 1 {
		if err := q.moveSchedule(ctx, all, l, name, t.tenant); err != nil {
			return err
		}
	}
	res, err := script.Run(ctx, q.rdb, setScheduleScript, "queue: set schedule", l.common(l.schedules, l.schedule(name)),
		l.commonArgs(name, randomID(8), spec, c.tz, payload, t.tenant, t.priority, t.maxAttempts, t.timeout.Milliseconds(),
			t.retention.Milliseconds(), c.catchUp, noOverlap, l.schedulesChannel())...)
	if err != nil {
		return err
	}
	if res == "UNKNOWN" {
		return fmt.Errorf("%w: %q", ErrUnknownTenant, t.tenant)
	}
	return nil
}

// moveSchedule prepares the schedule name to be set in the shard to, on
// a queue of many shards: it checks that the tenant ten ("" for none) is
// registered, then removes the schedule from the other shards. Removing
// before setting means that no two shards hold it at once, so that no
// tick is enqueued twice (once by each); a RemoveTenant racing in between
// leaves it removed, and SetSchedule returns ErrUnknownTenant.
func (q *Client) moveSchedule(ctx context.Context, all []layout, to layout, name, ten string) error {
	pipe := q.rdb.Pipeline()
	var registered *redis.BoolCmd
	if ten != "" {
		registered = pipe.HExists(ctx, to.tenants, "c:"+ten)
	}
	held := make([]*redis.BoolCmd, len(all))
	for i, l := range all {
		if l.shard != to.shard {
			held[i] = pipe.HExists(ctx, l.schedules, name)
		}
	}
	if _, err := pipe.Exec(ctx); err != nil {
		return fmt.Errorf("queue: set schedule: %w", err)
	}
	if registered != nil && !registered.Val() {
		return fmt.Errorf("%w: %q", ErrUnknownTenant, ten)
	}
	for i, l := range all {
		if held[i] != nil && held[i].Val() {
			if _, err := q.removeScheduleIn(ctx, l, name); err != nil {
				return err
			}
		}
	}
	return nil
}

// setScheduleScript adds or replaces a schedule, unless its definition
// is the same already (then it changes nothing), and tells every process.
//
//	KEYS[17] schedules, KEYS[18] the schedule's hash
//	ARGV[4] name, ARGV[5] a new version, ARGV[6] spec, ARGV[7] time zone,
//	ARGV[8] payload, ARGV[9] tenant, ARGV[10] priority, ARGV[11] max
//	attempts, ARGV[12] timeout (ms), ARGV[13] retention (ms), ARGV[14]
//	catch-up, ARGV[15] no overlap ("1" or ""), ARGV[16] the schedules
//	channel
//
// Returns "OK", "SAME" or "UNKNOWN" (the tenant is not registered:
// nothing is written).
var setScheduleScript = redis.NewScript(prelude + `
local ten = ARGV[9]
if ten ~= '' and not redis.call('HGET', K_TEN, 'c:' .. ten) then return 'UNKNOWN' end
local names = {'spec', 'tz', 'p', 'ten', 'pri', 'max', 'to', 'ret', 'cu', 'no'}
local cur = redis.call('HMGET', KEYS[18], unpack(names))
local same = redis.call('EXISTS', KEYS[18]) == 1
for i = 1, #names do
  if (cur[i] or '') ~= ARGV[5 + i] then same = false end
end
if same then return 'SAME' end
local t = now()
local f = {'HSET', KEYS[18], 'v', ARGV[5], 'at', t, 'last', t}
for i = 1, #names do
  f[#f + 1] = names[i]; f[#f + 1] = ARGV[5 + i]
end
redis.call(unpack(f))
redis.call('HDEL', KEYS[18], 'lres')
redis.call('HSET', KEYS[17], ARGV[4], ARGV[5])
redis.call(PUBLISH, ARGV[16], ARGV[4])
return 'OK'
`)

// RemoveSchedule removes the schedule name: no tick of it is enqueued
// after this returns; its tasks already queued run. ErrScheduleNotFound
// when the queue holds no such schedule. On a queue of n shards it
// removes it from every shard (n calls).
func (q *Client) RemoveSchedule(ctx context.Context, name string) error {
	if err := validScheduleName(name); err != nil {
		return err
	}
	all, err := q.layouts(ctx)
	if err != nil {
		return err
	}
	found := false
	for _, l := range all {
		ok, err := q.removeScheduleIn(ctx, l, name)
		if err != nil {
			return err
		}
		found = found || ok
	}
	if !found {
		return fmt.Errorf("%w: %q", ErrScheduleNotFound, name)
	}
	return nil
}

// removeScheduleIn removes the schedule name from the shard l, and
// reports whether the shard held it.
func (q *Client) removeScheduleIn(ctx context.Context, l layout, name string) (bool, error) {
	res, err := script.Run(ctx, q.rdb, removeScheduleScript, "queue: remove schedule", []string{l.schedules, l.schedule(name)},
		name, l.pubChannel(l.schedulesChannel()))
	if err != nil {
		return false, err
	}
	return res != int64(0), nil
}

// removeScheduleScript removes a schedule and tells every process.
//
//	KEYS[1] schedules, KEYS[2] the schedule's hash
//	ARGV[1] name, ARGV[2] the schedules channel (layout.pubChannel)
//
// Returns 1, or 0 when there was no such schedule.
var removeScheduleScript = redis.NewScript(`
if redis.call('HDEL', KEYS[1], ARGV[1]) == 0 then return 0 end
redis.call('DEL', KEYS[2])
local cmd, ch = 'PUBLISH', ARGV[2]
if string.byte(ch, 1) == 33 then cmd, ch = 'SPUBLISH', string.sub(ch, 2) end
redis.call(cmd, ch, ARGV[1])
return 1
`)

// RunSchedule enqueues a task of the schedule name now, outside its
// ticks (an operator's "run now"), and returns its id ("NAME@now-…", no
// tick: see TickOf; on a queue of many shards it starts with the
// schedule's shard, "2~NAME@now-…"). It counts as the schedule's last
// task for WithNoOverlap, and does not move its ticks. Errors:
// ErrInvalidOption, ErrScheduleNotFound, ErrQueueFull, ErrUnknownTenant
// (the tasks' tenant is no longer registered); the task is not queued
// then. On a queue of n shards a schedule with a tenant may cost up to n
// calls (it is looked for in its name's shard first).
func (q *Client) RunSchedule(ctx context.Context, name string) (string, error) {
	if err := validScheduleName(name); err != nil {
		return "", err
	}
	all, err := q.layouts(ctx)
	if err != nil {
		return "", err
	}
	var id string
	res, err := onShards(nameLayouts(all, name), "NOTFOUND", func(l layout) (any, error) {
		id = shardIDPrefix(l.shard, len(all)) + name + "@now-" + randomID(6)
		return script.Run(ctx, q.rdb, runScheduleScript, "queue: run schedule", l.common(l.schedule(name)), l.commonArgs(id)...)
	})
	if err != nil {
		return "", err
	}
	switch res {
	case "OK":
		return id, nil
	case "NOTFOUND":
		return "", fmt.Errorf("%w: %q", ErrScheduleNotFound, name)
	case "FULL":
		return "", fmt.Errorf("%w: schedule %q", ErrQueueFull, name)
	case "UNKNOWN":
		return "", fmt.Errorf("%w: schedule %q", ErrUnknownTenant, name)
	case "DUP":
		return "", fmt.Errorf("%w: %q", ErrDuplicateTask, id)
	}
	return "", fmt.Errorf("queue: run schedule: unexpected status %v", res)
}

// runScheduleScript enqueues a task of a schedule now (queueTask, with
// no submitting process).
//
//	KEYS[17] the schedule's hash
//	ARGV[4] the task id
//
// Returns "OK", "NOTFOUND" or queueTask's refusal.
var runScheduleScript = redis.NewScript(prelude + submitFn + `
local f = redis.call('HMGET', KEYS[17], 'v', 'p', 'max', 'to', 'ret', 'ten', 'pri')
if not f[1] then return 'NOTFOUND' end
local t = now()
local limit = tonumber(redis.call('HGET', K_SETTINGS, '` + settingMaxQueued + `') or '0')
local r = queueTask(t, '', limit, ARGV[4], f[2], f[3], f[4], 0, f[5], 'run:' .. ARGV[4], f[6], '', '', tonumber(f[7]), '', 0)
if r == 'OK' then redis.call('HSET', KEYS[17], 'lid', ARGV[4], 'lrun', t) end
queued()
return r
`)
