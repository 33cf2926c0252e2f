package queue

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"strconv"
	"time"

	"github.com/redis/go-redis/v9"
)

// Periodic tasks. A schedule is stored with the queue (layout.schedule,
// fields below); every serving process runs the scheduler (scheduler.go),
// which enqueues each tick once across the cluster. This file holds what
// a schedule is and how it is read (Schedules); its options are in
// schedule_options.go, the calls that change or run it in
// schedule_edit.go, its spec's ticks in schedule_spec.go.

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
