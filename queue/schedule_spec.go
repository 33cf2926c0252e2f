package queue

import (
	"strings"
	"time"

	"github.com/robfig/cron/v3"
)

// A schedule's spec, parsed: when its ticks fall. Every process computes
// the same ticks from the same stored spec, time zone and anchor, all in
// Redis's clock (invariant 9).

// cronParser reads cron expressions of 5 fields (minute to day of week)
// or 6 (seconds first), and descriptors (@hourly, @daily...).
var cronParser = cron.NewParser(cron.SecondOptional | cron.Minute | cron.Hour | cron.Dom | cron.Month | cron.Dow | cron.Descriptor)

// MinInterval is the shortest interval of an "@every" schedule.
const MinInterval = time.Second

// tickSpec is a parsed schedule spec: an interval from an anchor, or a
// cron schedule in a time zone.
type tickSpec struct {
	every  time.Duration // > 0 for "@every D"
	anchor time.Time     // the interval's ticks are anchor + k·every, k ≥ 1
	cron   cron.Schedule // else
}

// parseSpec parses spec in the time zone tz ("" for UTC); anchor is the
// schedule's creation time (Redis's clock), which an interval counts
// from. Errors wrap ErrInvalidOption.
func parseSpec(spec, tz string, anchor time.Time) (tickSpec, error) {
	s := strings.TrimSpace(spec)
	if s == "" {
		return tickSpec{}, invalid("empty schedule spec")
	}
	if strings.HasPrefix(s, "TZ=") || strings.HasPrefix(s, "CRON_TZ=") {
		return tickSpec{}, invalid("schedule spec %q: give the time zone with WithTimeZone, not in the spec", spec)
	}
	if rest, ok := strings.CutPrefix(s, "@every "); ok {
		if tz != "" {
			return tickSpec{}, invalid("schedule spec %q: a time zone applies to cron expressions, not to intervals", spec)
		}
		d, err := time.ParseDuration(strings.TrimSpace(rest))
		if err != nil {
			return tickSpec{}, invalid("schedule spec %q: %v", spec, err)
		}
		if d < MinInterval || d%time.Millisecond != 0 {
			return tickSpec{}, invalid("schedule spec %q: the interval must be at least %v, in whole milliseconds", spec, MinInterval)
		}
		return tickSpec{every: d, anchor: anchor}, nil
	}
	loc := time.UTC
	if tz != "" {
		var err error
		if loc, err = time.LoadLocation(tz); err != nil {
			return tickSpec{}, invalid("time zone %q: %v", tz, err)
		}
	}
	sched, err := cronParser.Parse(s)
	if err != nil {
		return tickSpec{}, invalid("schedule spec %q: %v", spec, err)
	}
	// The parser reads the expression in the process's local zone, which
	// processes do not share: the stored zone, or UTC, applies instead.
	switch c := sched.(type) {
	case *cron.SpecSchedule:
		c.Location = loc
	case cron.ConstantDelaySchedule: // "@every" is handled above
		return tickSpec{}, invalid("schedule spec %q: unsupported", spec)
	}
	return tickSpec{cron: sched}, nil
}

// next returns the first tick strictly after t, or the zero time when
// there is none (a cron expression that never matches again).
func (s tickSpec) next(t time.Time) time.Time {
	if s.every > 0 {
		if t.Before(s.anchor) {
			return s.anchor.Add(s.every)
		}
		k := t.Sub(s.anchor)/s.every + 1
		return s.anchor.Add(k * s.every)
	}
	return s.cron.Next(t)
}

// ticksIn returns the ticks in (from, to], ascending, at most max of
// them (the last ones).
func (s tickSpec) ticksIn(from, to time.Time, max int) []time.Time {
	var out []time.Time
	if s.every > 0 && to.Sub(from) > time.Duration(max)*s.every {
		// Skip the ticks that would be dropped.
		from = to.Add(-time.Duration(max) * s.every)
	}
	for t := s.next(from); !t.IsZero() && !t.After(to); t = s.next(t) {
		out = append(out, t)
		if len(out) > 2*max+16 {
			out = append(out[:0], out[len(out)-max:]...)
		}
	}
	if len(out) > max {
		out = out[len(out)-max:]
	}
	return out
}

// tickGrace is how late a tick may be enqueued: a tick not enqueued
// within tickGrace of its time (Redis's clock) is missed.
const tickGrace = 5 * time.Second

// MaxCatchUp bounds WithCatchUp.
const MaxCatchUp = 100

// dueTicks returns the ticks of s to send after last (the last tick
// handled) at now: every tick on time (within tickGrace), and before
// them the max(catchUp, 1) most recent missed ticks (the script runs the
// catchUp most recent missed ones and skips the others; one is sent
// even without catch-up, so that the script skips past every missed
// tick). Missed ticks are looked for in a window that grows until it
// holds enough of them or reaches last, so a long gap of frequent ticks
// is never walked through.
func (s tickSpec) dueTicks(last, now time.Time, catchUp int) []time.Time {
	first := s.next(last)
	if first.IsZero() || first.After(now) {
		return nil
	}
	want := max(catchUp, 1)
	cut := now.Add(-tickGrace) // ticks before cut are missed
	span := tickGrace + time.Minute
	for {
		from := now.Add(-span)
		if !from.After(last) {
			from = last
		}
		ticks := s.ticksIn(from, now, want+maxOnTime)
		missed := 0
		for _, t := range ticks {
			if t.Before(cut) {
				missed++
			}
		}
		if missed >= want || from.Equal(last) || span > 100*365*24*time.Hour {
			onTime := len(ticks) - missed
			return ticks[max(0, missed-want) : missed+onTime]
		}
		span *= 8
	}
}

// maxOnTime bounds the ticks within tickGrace: ticks are at least a
// second apart.
const maxOnTime = int(tickGrace/time.Second) + 1

// tickIDLayout is the time in a tick's task id: UTC, to the millisecond.
const tickIDLayout = "2006-01-02T15:04:05.000Z"

// tickID is the task id of a schedule's tick at t: "NAME@TIME", TIME the
// tick's time in UTC to the millisecond (2026-01-02T15:04:05.000Z).
func tickID(name string, t time.Time) string {
	return name + "@" + t.UTC().Format(tickIDLayout)
}

// TickOf tells whether a task id is the id of a schedule's tick, and if
// so which schedule's and which tick's (by Redis's clock): a handler of
// periodic tasks learns this way which period it runs for. The tasks of
// RunSchedule are no ticks. On a queue of many shards a tick's id starts
// with its shard ("2~NAME@TIME"): TickOf returns the schedule's name
// without it (no schedule's name starts so, see SetSchedule).
func TickOf(taskID string) (schedule string, tick time.Time, ok bool) {
	if carriedShard(taskID, MaxShards) >= 0 {
		_, taskID, _ = strings.Cut(taskID, shardSep)
	}
	i := strings.LastIndexByte(taskID, '@')
	if i < 1 {
		return "", time.Time{}, false
	}
	t, err := time.Parse(tickIDLayout, taskID[i+1:])
	if err != nil {
		return "", time.Time{}, false
	}
	return taskID[:i], t, true
}
