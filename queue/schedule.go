package queue

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"strconv"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/shepherd-go/shepherd/internal/script"
)

// Periodic tasks. A schedule is stored with the queue (layout.schedule,
// fields below); every serving process runs the scheduler (scheduler.go),
// which enqueues each tick once across the cluster.

// ErrScheduleNotFound is returned by RemoveSchedule and RunSchedule for a
// schedule the queue does not hold.
var ErrScheduleNotFound = errors.New("queue: schedule not found")

// MaxScheduleNameSize bounds a schedule's name, so that a tick's task id
// ("NAME@TIME", see TickOf) stays within MaxTaskIDSize.
const MaxScheduleNameSize = 200

// A schedule's hash (layout.schedule), written by setScheduleScript and
// the tick script, read by Schedules and the scheduler. The definition:
const (
	schedVersion   = "v"    // changes whenever the definition does (random)
	schedSpec      = "spec" // as given
	schedTZ        = "tz"   // WithTimeZone, "" for UTC
	schedCreated   = "at"   // set or replaced at (ms, Redis's clock): an interval's anchor
	schedPayload   = "p"    // the tasks' payload
	schedTenant    = "ten"  // the tasks' options (WithTaskOptions)
	schedPriority  = "pri"  //
	schedMaxAtt    = "max"  //
	schedTimeout   = "to"   // ms
	schedRetention = "ret"  // ms
	schedCatchUp   = "cu"   // WithCatchUp
	schedNoOverlap = "no"   // "1": WithNoOverlap
	// What became of its ticks:
	schedLast    = "last" // the last tick handled (ms), monotonic: ticks up to it are done
	schedResult  = "lres" // what became of it (a TickResult)
	schedLastID  = "lid"  // the last task it enqueued (a tick's or RunSchedule's)
	schedLastRun = "lrun" // when that task was enqueued (ms, Redis's clock)
)

// TickResult says what became of a schedule's last tick.
type TickResult string

// What becomes of a tick.
const (
	TickQueued    TickResult = "queued"    // its task was enqueued
	TickOverlap   TickResult = "overlap"   // skipped: the previous task was unfinished (WithNoOverlap)
	TickMissed    TickResult = "missed"    // skipped: not enqueued within 5s of its time, beyond the catch-up
	TickFull      TickResult = "full"      // refused: the queue held MaxQueued unfinished tasks
	TickNoTenant  TickResult = "no-tenant" // refused: the tasks' tenant is no longer registered
	TickDuplicate TickResult = "duplicate" // refused: a task of the tick's id existed already
)

// ScheduleInfo describes a schedule (Schedules). Times are by Redis's
// clock.
type ScheduleInfo struct {
	Name      string
	Spec      string
	TimeZone  string // "" for UTC; intervals have none
	Payload   []byte
	CatchUp   int
	NoOverlap bool
	// The options of its tasks.
	Tenant      string
	Priority    int
	MaxAttempts int
	Timeout     time.Duration
	Retention   time.Duration

	Created    time.Time  // set, or last replaced
	Next       time.Time  // its next tick; zero if it has none
	LastTick   time.Time  // the last tick handled; zero before the first
	LastResult TickResult // what became of LastTick
	LastTaskID string     // its last task (a tick's, or RunSchedule's)
	LastRun    time.Time  // when LastTaskID was enqueued
}

// ScheduleOption configures a schedule (SetSchedule).
type ScheduleOption func(*scheduleConfig) error

type scheduleConfig struct {
	tz        string
	catchUp   int
	noOverlap bool
	task      submitConfig
}

// WithTimeZone reads the cron expression in the IANA time zone name
// ("Europe/Paris"), daylight saving included; it needs the time zone
// database (see time.LoadLocation) on every serving process. Intervals
// take no time zone. Defaults to UTC.
func WithTimeZone(name string) ScheduleOption {
	return func(c *scheduleConfig) error {
		if name == "" {
			return invalid("empty time zone")
		}
		c.tz = name
		return nil
	}
}

// WithCatchUp runs up to n of the ticks missed while no process could
// enqueue them (the n most recent), as soon as a process can: 0 to
// MaxCatchUp. A tick is missed when it is not enqueued within 5s of its
// time. Defaults to 0: missed ticks are skipped.
func WithCatchUp(n int) ScheduleOption {
	return func(c *scheduleConfig) error {
		if n < 0 || n > MaxCatchUp {
			return invalid("catch-up must be 0 to %d, got %d", MaxCatchUp, n)
		}
		c.catchUp = n
		return nil
	}
}

// WithNoOverlap skips a tick while the schedule's previous task is
// unfinished (waiting, delayed, retrying or running): the tick is
// recorded as TickOverlap. Defaults to off: every tick is enqueued.
func WithNoOverlap() ScheduleOption {
	return func(c *scheduleConfig) error {
		c.noOverlap = true
		return nil
	}
}

// WithTaskOptions sets the options of the schedule's tasks: WithTenant,
// WithPriority, WithMaxAttempts, WithTimeout, WithRetention. WithTaskID,
// WithDelay, WithDueAt and WithDedup are refused with ErrInvalidOption
// (a tick's id and time are the schedule's). Defaults to Submit's
// defaults.
func WithTaskOptions(opts ...SubmitOption) ScheduleOption {
	return func(c *scheduleConfig) error {
		for _, o := range opts {
			if o == nil {
				return invalid("nil task option")
			}
			probe := defaultSubmitConfig()
			if err := o(&probe); err != nil {
				return err
			}
			if probe.id != "" || probe.delay != 0 || !probe.dueAt.IsZero() || probe.dedupKey != "" || probe.batch != "" {
				return invalid("a schedule's tasks take no WithTaskID, WithDelay, WithDueAt or WithDedup")
			}
			if err := o(&c.task); err != nil {
				return err
			}
		}
		return nil
	}
}

// validScheduleName checks a schedule's name: 1 to MaxScheduleNameSize
// bytes, not starting as the shard of a tick's id does on a queue of
// many shards (digits and "~", as in "2~"), which TickOf takes off.
func validScheduleName(name string) error {
	if name == "" || len(name) > MaxScheduleNameSize {
		return invalid("schedule name must be 1 to %d bytes, got %d", MaxScheduleNameSize, len(name))
	}
	if carriedShard(name, MaxShards) >= 0 {
		return invalid("schedule name %q starts as a shard's tick ids do (a number and %q)", name, shardSep)
	}
	return nil
}

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

// CheckSchedule checks a schedule as SetSchedule would, without Redis:
// its name, spec, time zone, options and payload; the tenant's
// registration aside, which only SetSchedule can check. It returns
// SetSchedule's errors for bad input (ErrInvalidOption,
// ErrPayloadTooLarge), so a program or a tool can refuse a bad schedule
// before it connects.
func CheckSchedule(name, spec string, payload []byte, opts ...ScheduleOption) error {
	_, err := checkSchedule(name, spec, payload, opts)
	return err
}

func checkSchedule(name, spec string, payload []byte, opts []ScheduleOption) (scheduleConfig, error) {
	c := scheduleConfig{task: defaultSubmitConfig()}
	if err := validScheduleName(name); err != nil {
		return c, err
	}
	for _, o := range opts {
		if o == nil {
			return c, invalid("nil schedule option")
		}
		if err := o(&c); err != nil {
			return c, err
		}
	}
	if _, err := parseSpec(spec, c.tz, time.Time{}); err != nil {
		return c, err
	}
	if len(payload) > DefaultMaxPayloadSize {
		return c, fmt.Errorf("%w: %d bytes, the most a schedule's payload may be is %d", ErrPayloadTooLarge, len(payload), DefaultMaxPayloadSize)
	}
	return c, nil
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

// Schedules lists the queue's schedules by name, with their next and
// last ticks. On a queue of n shards it reads every shard's (in two round
// trips, as on one).
func (q *Client) Schedules(ctx context.Context) ([]ScheduleInfo, error) {
	all, err := q.layouts(ctx)
	if err != nil {
		return nil, err
	}
	pipe := q.rdb.Pipeline()
	held := make([]*redis.StringSliceCmd, len(all))
	for i, l := range all {
		held[i] = pipe.HKeys(ctx, l.schedules)
	}
	if _, err := pipe.Exec(ctx); err != nil {
		return nil, fmt.Errorf("queue: schedules: %w", err)
	}
	var names []located // a schedule's name, and its shard
	for i, c := range held {
		names = append(names, locate(all[i], c.Val())...)
	}
	sort.SliceStable(names, func(i, j int) bool { return names[i].id < names[j].id })
	pipe = q.rdb.Pipeline()
	cmds := make([]*redis.MapStringStringCmd, len(names))
	for i, n := range names {
		cmds[i] = pipe.HGetAll(ctx, n.lay.schedule(n.id))
	}
	if _, err := pipe.Exec(ctx); err != nil && len(names) > 0 {
		return nil, fmt.Errorf("queue: schedules: %w", err)
	}
	out := make([]ScheduleInfo, 0, len(names))
	for i, n := range names {
		f := cmds[i].Val()
		if f[schedVersion] == "" {
			continue
		}
		s := parseSchedule(n.id, f)
		// Held by two shards only while SetSchedule moves it: list the
		// one in its own shard.
		if k := len(out) - 1; k >= 0 && out[k].Name == s.Name {
			if n.lay.shard == scheduleLayout(all, s.Name, s.Tenant).shard {
				out[k] = s
			}
			continue
		}
		out = append(out, s)
	}
	return out, nil
}

func parseSchedule(name string, f map[string]string) ScheduleInfo {
	num := func(k string) int64 { n, _ := strconv.ParseInt(f[k], 10, 64); return n }
	ms := func(k string) time.Time {
		if n := num(k); n > 0 {
			return time.UnixMilli(n)
		}
		return time.Time{}
	}
	s := ScheduleInfo{Name: name, Spec: f[schedSpec], TimeZone: f[schedTZ], CatchUp: int(num(schedCatchUp)),
		NoOverlap: f[schedNoOverlap] == "1", Tenant: f[schedTenant], Priority: int(num(schedPriority)),
		MaxAttempts: int(num(schedMaxAtt)), Timeout: time.Duration(num(schedTimeout)) * time.Millisecond,
		Retention: time.Duration(num(schedRetention)) * time.Millisecond, Created: ms(schedCreated),
		LastResult: TickResult(f[schedResult]), LastTaskID: f[schedLastID], LastRun: ms(schedLastRun)}
	if f[schedPayload] != "" {
		s.Payload = []byte(f[schedPayload])
	}
	last := ms(schedLast)
	if s.LastResult != "" {
		s.LastTick = last
	}
	if spec, err := parseSpec(s.Spec, s.TimeZone, s.Created); err == nil {
		s.Next = spec.next(last)
	}
	return s
}

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
