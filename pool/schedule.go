package pool

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/shepherd-go/shepherd/internal/member"
)

// A JobProducer plans a pool's jobs from a desired state: the jobs that
// should run (one per connected device, per active tenant, per stream).
// Schedule asks one node of the pool at a time for its plan, every
// interval, and starts and stops jobs to match.
type JobProducer interface {
	// Name names the schedule, unique in the pool: the nodes that
	// schedule producers of one name share one schedule.
	Name() string
	// Plan returns the plan to apply now. An error that wraps
	// ErrEndSchedule ends the schedule for every node, after the plan
	// returned with it (if not nil) is applied; any other error is
	// recorded (ScheduleInfo.LastError) and Plan is asked again at the
	// next interval. ctx ends when this node loses the schedule's lease
	// or closes.
	Plan(ctx context.Context) (*JobPlan, error)
}

// JobPlan is a desired state. Applying it is a diff against what runs:
// a job of Jobs that does not run is dispatched, one that runs with
// another payload is restarted (or notified: WithPayloadChange), one that
// runs with its payload is left alone; a key of Stop that runs is
// stopped.
type JobPlan struct {
	// Jobs should run. A key listed twice takes its last payload.
	Jobs []PlannedJob
	// Stop should not run: each is stopped if it runs, whoever started
	// it. A key in both Jobs and Stop runs.
	Stop []string
	// StopOthers stops the jobs this schedule started (or found running
	// and adopted: a key of Jobs that ran already) that Jobs leaves out.
	// Jobs the schedule never planned (dispatched by hand, or by another
	// schedule) are left alone.
	StopOthers bool
}

// PlannedJob is a job of a plan: its key and payload, as DispatchJob
// takes them.
type PlannedJob struct {
	Key     string
	Payload []byte
}

// ErrEndSchedule, returned (or wrapped) by JobProducer.Plan, ends the
// schedule for every node: it is removed from the pool, and the jobs it
// started keep running.
var ErrEndSchedule = errors.New("pool: end of schedule")

// ErrNoSchedule: Unschedule or StopTicker of a name the pool has no
// schedule or ticker of.
var ErrNoSchedule = errors.New("pool: no such schedule or ticker")

// PayloadChange says what applying a plan does to a job that runs with
// another payload than the plan's.
type PayloadChange int

const (
	// RestartOnChange stops the job and dispatches it again with the
	// plan's payload (the default).
	RestartOnChange PayloadChange = iota
	// NotifyOnChange sends the plan's payload to the job's
	// HandleNotification and leaves it running; the pool's stored payload
	// (what a moved job starts with) stays the one it was dispatched
	// with.
	NotifyOnChange
)

// ScheduleOption configures Schedule.
type ScheduleOption func(*scheduleConfig) error

type scheduleConfig struct {
	change PayloadChange
	rate   int // dispatches, stops and notifications a second
	conc   int // of them at once
}

// Defaults of the schedule options.
const (
	DefaultPlanRate        = 1000
	DefaultPlanConcurrency = 32
)

// WithPayloadChange sets what happens to a job that runs with another
// payload than its plan's (default RestartOnChange).
func WithPayloadChange(c PayloadChange) ScheduleOption {
	return func(cfg *scheduleConfig) error {
		if c != RestartOnChange && c != NotifyOnChange {
			return fmt.Errorf("%w: unknown PayloadChange %d", ErrInvalidOption, int(c))
		}
		cfg.change = c
		return nil
	}
}

// WithPlanRate bounds how many dispatches, stops and notifications a
// second applying a plan sends (default DefaultPlanRate), so that a plan
// of 100,000 new keys is spread over 100 s instead of dispatched at once.
func WithPlanRate(perSecond int) ScheduleOption {
	return func(cfg *scheduleConfig) error {
		if perSecond < 1 {
			return fmt.Errorf("%w: plan rate %d must be at least 1", ErrInvalidOption, perSecond)
		}
		cfg.rate = perSecond
		return nil
	}
}

// WithPlanConcurrency bounds how many of a plan's dispatches, stops and
// notifications wait for their worker at once (default
// DefaultPlanConcurrency). A DispatchJob returns once Start returned: with
// slow Starts, this bounds the rate too.
func WithPlanConcurrency(n int) ScheduleOption {
	return func(cfg *scheduleConfig) error {
		if n < 1 {
			return fmt.Errorf("%w: plan concurrency %d must be at least 1", ErrInvalidOption, n)
		}
		cfg.conc = n
		return nil
	}
}

// MinScheduleInterval is the shortest interval Schedule and NewTicker
// take.
const MinScheduleInterval = 10 * time.Millisecond

// Schedule schedules producer on this node: every interval, one node of
// the pool among those that scheduled a producer of this name (the
// planner, which holds the schedule's lease) asks its producer for a
// plan and applies it (see JobPlan). It returns once the schedule is
// stored; planning runs in the background until the node closes, the
// schedule is removed (Unschedule on any node) or the producer ends it
// (ErrEndSchedule).
//
// The lease is renewed every WorkerTTL/3; when the planner's node dies,
// is paused or cut off, another node takes the schedule over once its
// lease lapses (about WorkerTTL, by Redis's clock), and the first
// node's late writes are refused: every dispatch, stop and notification
// of a plan is fenced by the planner's lease. A node that takes over
// plans at the schedule's next due time. The interval of the latest
// Schedule call of the name applies.
//
// A key whose dispatch, stop or notification failed is reported
// (ScheduleInfo.Failed and Errors, a WARN log) and tried again by the
// next plan: the diff finds it still to do. Schedule returns an error
// wrapping ErrInvalidOption for a nil producer, an invalid name or
// interval, or an invalid option; ErrNodeClosed or ErrPoolShutdown; or
// the Redis error that stopped it.
func (n *Node) Schedule(ctx context.Context, producer JobProducer, interval time.Duration, opts ...ScheduleOption) error {
	if producer == nil {
		return fmt.Errorf("%w: nil JobProducer", ErrInvalidOption)
	}
	name := producer.Name()
	if err := checkUnitName("schedule", name); err != nil {
		return err
	}
	if interval < MinScheduleInterval {
		return fmt.Errorf("%w: schedule %q: interval %v below %v", ErrInvalidOption, name, interval, MinScheduleInterval)
	}
	cfg := scheduleConfig{change: RestartOnChange, rate: DefaultPlanRate, conc: DefaultPlanConcurrency}
	for _, o := range opts {
		if o == nil {
			return fmt.Errorf("%w: nil ScheduleOption", ErrInvalidOption)
		}
		if err := o(&cfg); err != nil {
			return err
		}
	}
	if err := n.errClosed(); err != nil {
		return err
	}
	if _, ok := n.shutdown.Get(shutdownFlag); ok {
		return ErrPoolShutdown
	}
	inc, err := n.run(ctx, createScheduleScript, "schedule", []string{n.lay.plan(name), n.lay.plans},
		name, interval.Milliseconds(), newID())
	if err != nil {
		return err
	}
	if err := n.mirrorSchedule(ctx, name, interval.Milliseconds(), fmt.Sprint(inc)); err != nil {
		return err
	}
	p := &planner{n: n, producer: producer, name: name, inc: fmt.Sprint(inc), cfg: cfg,
		logger: n.logger.With(slog.String("schedule", name)), tokens: make([]string, len(n.partsOrSelf()))}
	if !n.loops.Go(p.loop) {
		return n.errClosed()
	}
	return nil
}

// Unschedule removes the schedule name for every node: its planners
// stop (an apply under way is refused from its next write on), and the
// jobs it started keep running. It returns ErrNoSchedule when the pool
// has no schedule of that name.
func (n *Node) Unschedule(ctx context.Context, name string) error {
	if err := n.errClosed(); err != nil {
		return err
	}
	return Unschedule(ctx, n.rdb, n.name, name)
}

// checkUnitName validates the name of a schedule or a ticker: 1 to
// MaxKeySize bytes of UTF-8 without control characters (member.CheckText).
func checkUnitName(what, name string) error {
	if err := member.CheckText(what+" name", name, MaxKeySize); err != nil {
		return fmt.Errorf("%w: %w", ErrInvalidOption, err)
	}
	return nil
}
