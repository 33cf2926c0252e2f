package main

import (
	"context"
	"errors"
	"fmt"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/shepherd-go/shepherd/queue"
)

// scheduleFlags are the flags of "schedules set".
type scheduleFlags struct {
	payload     string
	tz          string
	catchUp     int
	noOverlap   bool
	tenant      string
	priority    int
	maxAttempts int
	taskTimeout time.Duration
	retention   time.Duration
}

// schedulesCmd is "shepherd schedules": a queue's periodic tasks, through
// a queue.Client as the queue commands.
func schedulesCmd() *cobra.Command {
	o := &queueOpts{limit: 1}
	sf := &scheduleFlags{}
	cmd := &cobra.Command{
		Use:     "schedules",
		Short:   "a queue's periodic tasks: ls, set NAME SPEC, rm NAME, run NAME",
		GroupID: groupQueue,
		Args:    cobra.ArbitraryArgs,
		RunE:    requireSubcommand,
	}
	o.register(cmd.PersistentFlags())
	set := onQueue(o, "set --queue NAME SCHEDULE SPEC", `add or replace a schedule; SPEC is a cron expression (5 fields, or 6 with seconds first), a descriptor (@hourly) or "@every DURATION"`,
		func(cmd *cobra.Command, args []string) error {
			if err := rangeArgs(2, 2, "want a schedule name and a spec (quote it)")(cmd, args); err != nil {
				return err
			}
			// Bad input is refused before connecting.
			if err := queue.CheckSchedule(args[0], args[1], []byte(sf.payload), sf.options()...); err != nil {
				return usagef("%v", err)
			}
			return nil
		},
		func(ctx context.Context, c *queue.Client, o queueOpts) error { return schedulesSet(ctx, c, o, *sf) })
	fs := set.Flags()
	fs.StringVar(&sf.payload, "payload", "", "the tasks' `payload`")
	fs.StringVar(&sf.tz, "tz", "", "read the cron expression in this IANA time `zone` (default UTC)")
	fs.IntVar(&sf.catchUp, "catch-up", 0, "run up to `n` missed ticks when a process comes back (default: skip them)")
	fs.BoolVar(&sf.noOverlap, "no-overlap", false, "skip a tick while the schedule's previous task is unfinished")
	fs.StringVar(&sf.tenant, "tenant", "", "the tasks' `tenant` (registered)")
	fs.IntVar(&sf.priority, "priority", 0, "the tasks' priority (0 to 9)")
	fs.IntVar(&sf.maxAttempts, "max-attempts", queue.DefaultMaxAttempts, "the tasks' max attempts")
	fs.DurationVar(&sf.taskTimeout, "task-timeout", queue.DefaultTimeout, "each attempt's `timeout`")
	fs.DurationVar(&sf.retention, "retention", queue.DefaultRetention, "how long a task's outcome is kept")
	cmd.AddCommand(
		onQueue(o, "ls --queue NAME", "list the schedules: spec, next tick, last tick and what became of it, last task", noArgs, schedulesList),
		set,
		onQueue(o, "rm --queue NAME SCHEDULE...", "remove schedules (their queued tasks still run)", rangeArgs(1, -1, "missing schedule name"),
			func(ctx context.Context, c *queue.Client, o queueOpts) error {
				return eachID(o, "removed", func(name string) error { return c.RemoveSchedule(ctx, name) })
			}),
		onQueue(o, "run --queue NAME SCHEDULE", "enqueue a schedule's task now, outside its ticks", rangeArgs(1, 1, "want one schedule name"),
			schedulesRun),
	)
	return cmd
}

func schedulesList(ctx context.Context, c *queue.Client, o queueOpts) error {
	all, err := c.Schedules(ctx)
	if err != nil {
		return err
	}
	if o.json {
		return printJSON(o.stdout, all)
	}
	when := func(t time.Time) string {
		if t.IsZero() {
			return "-"
		}
		return t.UTC().Format("2006-01-02T15:04:05.000Z")
	}
	dash := func(s string) string {
		if s == "" {
			return "-"
		}
		return s
	}
	tw := tabwriter.NewWriter(o.stdout, 2, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "SCHEDULE\tSPEC\tZONE\tNEXT\tLAST TICK\tRESULT\tLAST TASK")
	for _, s := range all {
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%s\n", s.Name, s.Spec, dash(s.TimeZone), when(s.Next), when(s.LastTick),
			dash(string(s.LastResult)), dash(s.LastTaskID))
	}
	return tw.Flush()
}

// options are the schedule options the flags of "schedules set" give.
func (sf *scheduleFlags) options() []queue.ScheduleOption {
	task := []queue.SubmitOption{queue.WithPriority(sf.priority), queue.WithMaxAttempts(sf.maxAttempts),
		queue.WithTimeout(sf.taskTimeout), queue.WithRetention(sf.retention)}
	if sf.tenant != "" {
		task = append(task, queue.WithTenant(sf.tenant))
	}
	opts := []queue.ScheduleOption{queue.WithCatchUp(sf.catchUp), queue.WithTaskOptions(task...)}
	if sf.tz != "" {
		opts = append(opts, queue.WithTimeZone(sf.tz))
	}
	if sf.noOverlap {
		opts = append(opts, queue.WithNoOverlap())
	}
	return opts
}

func schedulesSet(ctx context.Context, c *queue.Client, o queueOpts, sf scheduleFlags) error {
	name, spec := o.ids[0], o.ids[1]
	if err := c.SetSchedule(ctx, name, spec, []byte(sf.payload), sf.options()...); err != nil {
		if errors.Is(err, queue.ErrInvalidOption) {
			return fmt.Errorf("%w: %w", errUsage, err)
		}
		return err
	}
	if o.json {
		return printJSON(o.stdout, struct {
			Schedule string `json:"schedule"`
			Spec     string `json:"spec"`
		}{name, spec})
	}
	fmt.Fprintf(o.stdout, "%s: %s\n", name, spec)
	return nil
}

func schedulesRun(ctx context.Context, c *queue.Client, o queueOpts) error {
	id, err := c.RunSchedule(ctx, o.ids[0])
	if err != nil {
		return err
	}
	if o.json {
		return printJSON(o.stdout, struct {
			Schedule string `json:"schedule"`
			TaskID   string `json:"task_id"`
		}{o.ids[0], id})
	}
	fmt.Fprintf(o.stdout, "%s: queued task %s\n", o.ids[0], id)
	return nil
}
