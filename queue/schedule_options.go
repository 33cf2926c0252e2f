package queue

import (
	"fmt"
	"time"
)

// A schedule's options (ScheduleOption) and the checks of a definition
// that SetSchedule and CheckSchedule share.

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
