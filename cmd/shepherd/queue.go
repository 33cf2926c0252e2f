package main

import (
	"cmp"
	"context"
	"fmt"
	"io"
	"strconv"
	"text/tabwriter"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/shepherd-go/shepherd/internal/humanize"
	"github.com/shepherd-go/shepherd/queue"
)

// queueOpts are the flags of the queue and tenants commands, and what a
// subcommand needs to run.
type queueOpts struct {
	addr, name     string
	json           bool
	state          string
	limit          int
	yes            bool
	force          bool // delete: even while processes are live
	batch          int  // move-shard's keys a MIGRATE
	timeout        time.Duration
	stdout, stderr io.Writer
	ids            []string              // the positional arguments
	rdb            redis.UniversalClient // the connection, set by runOnQueue
}

// queueFunc is what a queue or tenants subcommand does with a Client of
// an existing queue.
type queueFunc func(ctx context.Context, c *queue.Client, o queueOpts) error

// register adds the flags the queue and tenants subcommands share to fs.
func (o *queueOpts) register(fs *pflag.FlagSet) {
	redisFlag(fs, &o.addr)
	fs.StringVar(&o.name, "queue", "", "the queue's `name` (required)")
	fs.BoolVar(&o.json, "json", false, "print JSON")
	fs.DurationVar(&o.timeout, "timeout", 30*time.Second, "give up after this `duration`")
}

// queueCmd is "shepherd queue": it reads and changes a queue through a
// queue.Client, which registers no process. Its flags are the group's, so
// that they may come before the subcommand.
func queueCmd() *cobra.Command {
	o := &queueOpts{}
	cmd := &cobra.Command{
		Use:     "queue",
		Short:   "inspect a queue: stats, ls, inspect, submit, dead, replay, cancel, delete-dead, purge-dead, drain, pause, resume, rate, reshard, move-shard, delete",
		GroupID: groupQueue,
		Args:    cobra.ArbitraryArgs,
		RunE:    requireSubcommand,
	}
	fs := cmd.PersistentFlags()
	o.register(fs)
	fs.StringVar(&o.state, "state", "waiting", "ls: the `state` to list: "+listedStateNames)
	fs.IntVar(&o.limit, "limit", 100, "ls, dead: list at most `n` tasks")
	fs.BoolVar(&o.yes, "yes", false, "purge-dead, drain, move-shard, delete: do not ask for confirmation (required with -json)")
	taskIDs := rangeArgs(1, -1, "missing task id")
	cmd.AddCommand(
		onQueue(o, "stats --queue NAME", "the queue's depth by state, its processes and workers", noArgs, queueStats),
		onQueue(o, "ls --queue NAME", "list the tasks in a state (--state)", noArgs, queueList),
		onQueue(o, "inspect --queue NAME ID", "show one task: state, tenant, attempts and their errors, times, result",
			rangeArgs(1, 1, "want one task id"), queueInspect),
		onQueue(o, "dead --queue NAME", "list the dead letters, newest first, with their last error", noArgs, queueDead),
		onQueue(o, "replay --queue NAME ID...", "queue dead letters again", taskIDs, queueReplay),
		onQueue(o, "cancel --queue NAME ID...", "cancel tasks", taskIDs, queueCancel),
		onQueue(o, "delete-dead --queue NAME ID...", "delete these dead letters", taskIDs, queueDeleteDead),
		onQueue(o, "purge-dead --queue NAME", "delete every dead letter (asks for confirmation)", noArgs, queuePurge),
		onQueue(o, "drain --queue NAME", "switch every serving process to drain mode (asks for confirmation)", noArgs, queueDrain),
		onQueue(o, "pause --queue NAME", "pause the queue: tasks in flight finish, none starts until resume", noArgs, queuePause),
		onQueue(o, "resume --queue NAME", "resume a paused queue", noArgs, queueResume),
		onQueue(o, "rate --queue NAME [RATE]", "show the queue's rate limit, or set it: N/DURATION[+BURST] (500/1s, 500/1s+25), none removes it",
			rateArgs(0, ""), queueRate),
		onQueue(o, "reshard --queue NAME N", "change an idle queue's shard count (no process open, nothing unfinished, no dead letter)",
			shardsArg, queueReshard),
		moveShardCmd(o),
		queueSubmitCmd(o),
		queueDeleteCmd(o),
	)
	return cmd
}

// onQueue returns a subcommand of the queue or tenants group that runs f
// on the queue named by the group's flags.
func onQueue(o *queueOpts, use, short string, args cobra.PositionalArgs, f queueFunc) *cobra.Command {
	return &cobra.Command{
		Use:   use,
		Short: short,
		Args:  args,
		RunE: func(cmd *cobra.Command, ids []string) error {
			return runOnQueue(cmd, *o, ids, f)
		},
	}
}

// runOnQueue checks the flags, connects, and runs f with a Client of the
// queue, which must exist.
func runOnQueue(cmd *cobra.Command, o queueOpts, ids []string, f queueFunc) error {
	switch {
	case o.name == "":
		return usagef("-queue is required")
	case o.timeout <= 0:
		return usagef("-timeout must be positive")
	case o.limit < 1:
		return usagef("-limit must be at least 1")
	}
	o.stdout, o.stderr, o.ids = cmd.OutOrStdout(), cmd.ErrOrStderr(), ids
	ctx, cancel := interruptible()
	defer cancel()
	ctx, cancelT := context.WithTimeout(ctx, o.timeout)
	defer cancelT()
	rdb, err := connect(ctx, o.addr)
	if err != nil {
		return err
	}
	defer rdb.Close()
	o.rdb = rdb
	c, err := queue.NewClient(rdb, o.name)
	if err != nil {
		return fmt.Errorf("%w: %w", errUsage, err)
	}
	exists, err := c.Exists(ctx)
	if err == nil && !exists {
		err = notFound(ctx, rdb, "queue", o.name)
	}
	if err != nil {
		return err
	}
	return f(ctx, c, o)
}

func queueStats(ctx context.Context, c *queue.Client, o queueOpts) error {
	st, err := c.Stats(ctx)
	if err != nil {
		return err
	}
	if o.json {
		return printJSON(o.stdout, st)
	}
	shards := ""
	if st.Shards > 1 {
		shards = fmt.Sprintf(" (%d shards)", st.Shards)
	}
	fmt.Fprintf(o.stdout, "queue %s%s: %d available, %d delayed, %d retrying, %d in flight, %d dead (%d dropped)\n",
		c.Name(), shards, st.Available, st.Delayed, st.Retrying, st.InFlight, st.Dead, st.DeadDropped)
	starts := "running"
	if st.Paused {
		starts = "PAUSED (no task starts until queue resume)"
	}
	fmt.Fprintf(o.stdout, "starts: %s; rate %s\n", starts, rateText(st.Rate))
	clients := 0
	for _, p := range st.Processes {
		if p.SubmitOnly() {
			clients++
		}
	}
	fmt.Fprintf(o.stdout, "workers: %d busy of %d, in %d processes", st.Busy, st.Workers, len(st.Processes)-clients)
	if clients > 0 {
		fmt.Fprintf(o.stdout, " (and %d submit-only)", clients)
	}
	fmt.Fprintln(o.stdout)
	tw := tabwriter.NewWriter(o.stdout, 2, 4, 2, ' ', 0)
	if st.Shards > 1 {
		fmt.Fprintln(tw, "SHARD\tTAG\tSLOT\tMASTER\tAVAILABLE\tIN FLIGHT\tDELAYED\tRETRYING\tDEAD\tTENANTS")
		for _, s := range st.PerShard {
			fmt.Fprintf(tw, "%d\t%s\t%d\t%s\t%d\t%d\t%d\t%d\t%d\t%d\n", s.Shard, s.Tag, s.Slot, cmp.Or(s.Master, "-"),
				s.Available, s.InFlight, s.Delayed, s.Retrying, s.Dead, s.Tenants)
		}
		if err := tw.Flush(); err != nil {
			return err
		}
	}
	fmt.Fprintln(tw, "PROCESS\tNAME\tHOST\tPID\tMODE\tWORKERS\tBUSY\tLIMIT\tPARTITION\tDROPS\tP50/P99\tLEASE")
	for _, p := range st.Processes {
		mode, lim, part, drops, took := "-", "-", "-", "-", "-"
		if p.Sampled > 0 {
			took = humanize.Duration(p.P50) + "/" + humanize.Duration(p.P99)
		}
		if p.Mode != "" {
			mode = p.Mode
		}
		if p.Limit > 0 {
			lim, drops = fmt.Sprint(p.Limit), fmt.Sprint(p.Drops)
		}
		if p.Part != "" {
			part = p.Part
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%d\t%s\t%d\t%d\t%s\t%s\t%s\t%s\t%s\n", p.ID, cmp.Or(p.Name, "-"), p.Host, p.PID, mode, p.Workers, p.Busy, lim, part, drops,
			took, humanize.Duration(p.LeaseFor))
	}
	return tw.Flush()
}

func queueReplay(ctx context.Context, c *queue.Client, o queueOpts) error {
	return eachID(o, "replayed", func(id string) error { return c.Replay(ctx, id) })
}

func queueCancel(ctx context.Context, c *queue.Client, o queueOpts) error {
	return eachID(o, "cancelled", func(id string) error { return c.Cancel(ctx, id) })
}

func queueDeleteDead(ctx context.Context, c *queue.Client, o queueOpts) error {
	return eachID(o, "deleted", func(id string) error { return c.DeleteDead(ctx, id) })
}

// eachID runs f on every id, says what happened to each (with -json, an
// array of {"id", "done"} or {"id", "error"}), and fails if one failed.
func eachID(o queueOpts, done string, f func(id string) error) error {
	type result struct {
		ID    string `json:"id"`
		Done  string `json:"done,omitempty"`
		Error string `json:"error,omitempty"`
	}
	results := make([]result, 0, len(o.ids))
	failed := 0
	for _, id := range o.ids {
		if err := f(id); err != nil {
			results = append(results, result{ID: id, Error: err.Error()})
			failed++
			continue
		}
		results = append(results, result{ID: id, Done: done})
	}
	if o.json {
		if err := printJSON(o.stdout, results); err != nil {
			return err
		}
	} else {
		for _, r := range results {
			fmt.Fprintf(o.stdout, "%s: %s%s\n", r.ID, r.Done, r.Error)
		}
	}
	if failed > 0 {
		return fmt.Errorf("%d of %d failed", failed, len(o.ids))
	}
	return nil
}

// confirmed reports whether the operator said yes: -yes, or a yes to
// question. With -json it asks nothing (the question would not be JSON).
func confirmed(o queueOpts, question string) bool {
	return o.yes || (!o.json && confirm(o.stderr, question))
}

func queuePurge(ctx context.Context, c *queue.Client, o queueOpts) error {
	if !confirmed(o, fmt.Sprintf("Delete every dead letter of queue %q?", c.Name())) {
		return fmt.Errorf("%w: not confirmed", errUsage)
	}
	n, err := c.PurgeDead(ctx)
	if err != nil {
		return err
	}
	if o.json {
		return printJSON(o.stdout, struct {
			Deleted int `json:"deleted"`
		}{n})
	}
	fmt.Fprintf(o.stdout, "deleted %d dead letters\n", n)
	return nil
}

// queueDrain switches every serving process of the queue to drain mode
// (queue.Client.Drain), after a confirmation unless -yes.
// shardsArg checks reshard's argument: one shard count.
func shardsArg(cmd *cobra.Command, args []string) error {
	if err := rangeArgs(1, 1, "want the new shard count")(cmd, args); err != nil {
		return err
	}
	if n, err := strconv.Atoi(args[0]); err != nil || n < 1 || n > queue.MaxShards {
		return usagef("shard count %q: want 1 to %d", args[0], queue.MaxShards)
	}
	return nil
}

// queueReshard changes the queue's shard count (queue.Client.Reshard).
func queueReshard(ctx context.Context, c *queue.Client, o queueOpts) error {
	n, _ := strconv.Atoi(o.ids[0])
	if err := c.Reshard(ctx, n); err != nil {
		return err
	}
	if o.json {
		return printJSON(o.stdout, struct {
			Queue  string `json:"queue"`
			Shards int    `json:"shards"`
		}{c.Name(), n})
	}
	fmt.Fprintf(o.stdout, "queue %s has %d shards; open its processes without -shards, or with %d\n", c.Name(), n, n)
	return nil
}

func queueDrain(ctx context.Context, c *queue.Client, o queueOpts) error {
	if !confirmed(o, fmt.Sprintf("Switch every serving process of queue %q to drain mode (each stops once nothing is left for it)?", c.Name())) {
		return fmt.Errorf("%w: not confirmed", errUsage)
	}
	n, err := c.Drain(ctx)
	if err != nil {
		return err
	}
	if o.json {
		return printJSON(o.stdout, struct {
			Draining int `json:"processes_asked_to_drain"`
		}{n})
	}
	fmt.Fprintf(o.stdout, "asked %d processes to drain\n", n)
	return nil
}
