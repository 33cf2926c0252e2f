package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/shepherd-go/shepherd/queue"
)

func init() {
	commands["queue"] = command{summary: "inspect a queue: stats, ls, dead, replay, cancel, delete-dead, purge-dead, drain", run: runQueue}
	commands["tenants"] = command{summary: "a queue's tenants: ls, set ID CAPACITY, rm ID, untenanted CAPACITY", run: runTenants}
}

const (
	queueSynopsis   = "queue stats|ls|dead|replay|cancel|delete-dead|purge-dead|drain -queue NAME [flags] [ID...]"
	tenantsSynopsis = "tenants ls|set ID CAPACITY|rm ID...|untenanted CAPACITY|none -queue NAME [flags]"
)

// queueSubcommands maps a queue subcommand to what it does with a Client
// of an existing queue.
var queueSubcommands = map[string]func(ctx context.Context, c *queue.Client, o queueOpts) error{
	"stats":       queueStats,
	"ls":          queueList,
	"dead":        queueDead,
	"replay":      queueReplay,
	"cancel":      queueCancel,
	"purge-dead":  queuePurge,
	"delete-dead": queueDeleteDead,
	"drain":       queueDrain,
}

type queueOpts struct {
	stdout, stderr io.Writer
	json           bool
	state          string
	limit          int
	yes            bool
	ids            []string
}

// tenantsSubcommands maps a tenants subcommand to what it does.
var tenantsSubcommands = map[string]func(ctx context.Context, c *queue.Client, o queueOpts) error{
	"ls":         tenantsList,
	"set":        tenantsSet,
	"rm":         tenantsRemove,
	"untenanted": tenantsUntenanted,
}

// runQueue runs "shepherd queue SUB": it reads the queue through a
// queue.Client, which registers no process.
func runQueue(args []string, stdout, stderr io.Writer) int {
	return runClientCommand("queue", queueSynopsis, queueSubcommands, args, stdout, stderr)
}

// runTenants runs "shepherd tenants SUB", as runQueue.
func runTenants(args []string, stdout, stderr io.Writer) int {
	return runClientCommand("tenants", tenantsSynopsis, tenantsSubcommands, args, stdout, stderr)
}

// wantArgs is how many arguments each subcommand takes (at least, at
// most: -1 for any), and what to say when some are missing.
var wantArgs = map[string]struct {
	min, max int
	missing  string
}{
	"queue replay": {1, -1, "missing task id"}, "queue cancel": {1, -1, "missing task id"}, "queue delete-dead": {1, -1, "missing task id"},
	"tenants set": {2, 2, "want a tenant id and a capacity"}, "tenants rm": {1, -1, "missing tenant id"},
	"tenants untenanted": {1, 1, "want a capacity, or none"},
}

func runClientCommand(cmd, synopsis string, subs map[string]func(ctx context.Context, c *queue.Client, o queueOpts) error,
	args []string, stdout, stderr io.Writer) int {
	if len(args) == 0 || subs[args[0]] == nil {
		if len(args) > 0 && (args[0] == "-h" || args[0] == "-help" || args[0] == "--help") {
			fmt.Fprintf(stderr, "usage: shepherd %s\n", synopsis)
			return exitOK
		}
		fmt.Fprintf(stderr, "usage: shepherd %s\n", synopsis)
		return exitUsage
	}
	sub := args[0]
	fs := newFlags(cmd+" "+sub, synopsis, stderr)
	addr := redisFlag(fs)
	name := fs.String("queue", "", "the queue's `name` (required)")
	o := queueOpts{stdout: stdout, stderr: stderr}
	fs.BoolVar(&o.json, "json", false, "print JSON")
	o.state, o.limit = "waiting", 100
	if cmd == "queue" {
		fs.StringVar(&o.state, "state", "waiting", "ls: the `state` to list: waiting, delayed, retry, active or dead")
		fs.IntVar(&o.limit, "limit", 100, "ls, dead: list at most `n` tasks")
		fs.BoolVar(&o.yes, "yes", false, "purge-dead, drain: do not ask for confirmation")
	}
	timeout := fs.Duration("timeout", 30*time.Second, "give up after this `duration`")
	if code, ok := parse(fs, args[1:]); !ok {
		return code
	}
	o.ids = fs.Args()
	switch {
	case *name == "":
		return usageError(fs, stderr, "-queue is required")
	case *timeout <= 0:
		return usageError(fs, stderr, "-timeout must be positive")
	case o.limit < 1:
		return usageError(fs, stderr, "-limit must be at least 1")
	case len(o.ids) < wantArgs[cmd+" "+sub].min:
		return usageError(fs, stderr, "%s", wantArgs[cmd+" "+sub].missing)
	case wantArgs[cmd+" "+sub].max >= 0 && len(o.ids) > wantArgs[cmd+" "+sub].max:
		return usageError(fs, stderr, "unexpected arguments %q", o.ids[wantArgs[cmd+" "+sub].max:])
	}
	ctx, cancel := interruptible()
	defer cancel()
	ctx, cancelT := context.WithTimeout(ctx, *timeout)
	defer cancelT()
	rdb, err := connect(ctx, *addr)
	if err != nil {
		return fail(stderr, fs.Name(), err)
	}
	defer rdb.Close()
	c, err := queue.NewClient(rdb, *name)
	if err != nil {
		return fail(stderr, fs.Name(), fmt.Errorf("%w: %w", errUsage, err))
	}
	exists, err := c.Exists(ctx)
	if err == nil && !exists {
		err = fmt.Errorf("queue %q not found", *name)
	}
	if err == nil {
		err = subs[sub](ctx, c, o)
	}
	if err != nil {
		return fail(stderr, fs.Name(), err)
	}
	return exitOK
}

func queueStats(ctx context.Context, c *queue.Client, o queueOpts) error {
	st, err := c.Stats(ctx)
	if err != nil {
		return err
	}
	if o.json {
		return json.NewEncoder(o.stdout).Encode(st)
	}
	fmt.Fprintf(o.stdout, "queue %s: %d available, %d delayed, %d retrying, %d in flight, %d dead (%d dropped)\n",
		c.Name(), st.Available, st.Delayed, st.Retrying, st.InFlight, st.Dead, st.DeadDropped)
	fmt.Fprintf(o.stdout, "workers: %d busy of %d, in %d processes\n", st.Busy, st.Workers, len(st.Processes))
	tw := tabwriter.NewWriter(o.stdout, 2, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "PROCESS\tHOST\tPID\tMODE\tWORKERS\tBUSY\tLIMIT\tPARTITION\tDROPS\tP50/P99\tLEASE")
	for _, p := range st.Processes {
		mode, lim, part, drops, took := "-", "-", "-", "-", "-"
		if p.Sampled > 0 {
			took = fmt.Sprintf("%v/%v", p.P50.Round(10*time.Microsecond), p.P99.Round(10*time.Microsecond))
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
		fmt.Fprintf(tw, "%s\t%s\t%d\t%s\t%d\t%d\t%s\t%s\t%s\t%s\t%v\n", p.ID, p.Host, p.PID, mode, p.Workers, p.Busy, lim, part, drops,
			took, p.LeaseFor.Round(time.Millisecond))
	}
	return tw.Flush()
}

func queueList(ctx context.Context, c *queue.Client, o queueOpts) error {
	state := queue.State(o.state)
	switch state {
	case queue.StateWaiting, queue.StateDelayed, queue.StateRetrying, queue.StateActive, queue.StateDead:
	default:
		return fmt.Errorf("%w: -state must be waiting, delayed, retry, active or dead, got %q", errUsage, o.state)
	}
	tasks, err := c.Tasks(ctx, state, 0, o.limit)
	if err != nil {
		return err
	}
	return printTasks(o, tasks)
}

func queueDead(ctx context.Context, c *queue.Client, o queueOpts) error {
	tasks, err := c.DeadLetters(ctx, 0, o.limit)
	if err != nil {
		return err
	}
	return printTasks(o, tasks)
}

// taskRow is a task as ls and dead print it.
type taskRow struct {
	ID        string    `json:"id"`
	State     string    `json:"state"`
	Attempt   int       `json:"attempt"`
	Max       int       `json:"max_attempts"`
	Process   string    `json:"process,omitempty"`
	Submitted time.Time `json:"submitted"`
	Due       time.Time `json:"due"`
	LastError string    `json:"last_error,omitempty"`
	Payload   []byte    `json:"payload,omitempty"`
}

func printTasks(o queueOpts, tasks []queue.TaskInfo) error {
	rows := make([]taskRow, 0, len(tasks))
	for _, t := range tasks {
		r := taskRow{ID: t.ID, State: string(t.State), Attempt: t.Attempt, Max: t.MaxAttempts, Process: t.Process,
			Submitted: t.Submitted, Due: t.Due, Payload: t.Payload}
		if n := len(t.Errors); n > 0 {
			r.LastError = t.Errors[n-1].Err
		}
		rows = append(rows, r)
	}
	if o.json {
		return json.NewEncoder(o.stdout).Encode(rows)
	}
	tw := tabwriter.NewWriter(o.stdout, 2, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "ID\tSTATE\tATTEMPT\tDUE\tPROCESS\tLAST ERROR")
	for _, r := range rows {
		proc := r.Process
		if proc == "" {
			proc = "-"
		}
		fmt.Fprintf(tw, "%s\t%s\t%d/%d\t%s\t%s\t%s\n", r.ID, r.State, r.Attempt, r.Max,
			r.Due.Format(time.RFC3339), proc, firstLine(r.LastError))
	}
	return tw.Flush()
}

func firstLine(s string) string {
	if i := strings.IndexByte(s, '\n'); i >= 0 {
		return s[:i] + " …"
	}
	return s
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

// eachID runs f on every id, says what happened to each, and fails if
// one failed.
func eachID(o queueOpts, done string, f func(id string) error) error {
	failed := 0
	for _, id := range o.ids {
		if err := f(id); err != nil {
			fmt.Fprintf(o.stdout, "%s: %v\n", id, err)
			failed++
			continue
		}
		fmt.Fprintf(o.stdout, "%s: %s\n", id, done)
	}
	if failed > 0 {
		return fmt.Errorf("%d of %d failed", failed, len(o.ids))
	}
	return nil
}

func queuePurge(ctx context.Context, c *queue.Client, o queueOpts) error {
	if !o.yes && !confirm(o.stderr, fmt.Sprintf("Delete every dead letter of queue %q?", c.Name())) {
		return fmt.Errorf("%w: not confirmed", errUsage)
	}
	n, err := c.PurgeDead(ctx)
	if err != nil {
		return err
	}
	fmt.Fprintf(o.stdout, "deleted %d dead letters\n", n)
	return nil
}

// queueDrain switches every serving process of the queue to drain mode
// (queue.Client.Drain), after a confirmation unless -yes.
func queueDrain(ctx context.Context, c *queue.Client, o queueOpts) error {
	if !o.yes && !confirm(o.stderr, fmt.Sprintf("Switch every serving process of queue %q to drain mode (each stops once nothing is left for it)?", c.Name())) {
		return fmt.Errorf("%w: not confirmed", errUsage)
	}
	n, err := c.Drain(ctx)
	if err != nil {
		return err
	}
	fmt.Fprintf(o.stdout, "asked %d processes to drain\n", n)
	return nil
}

func tenantsList(ctx context.Context, c *queue.Client, o queueOpts) error {
	tenants, err := c.Tenants(ctx)
	if err != nil {
		return err
	}
	if o.json {
		if tenants == nil {
			tenants = []queue.TenantInfo{}
		}
		return json.NewEncoder(o.stdout).Encode(tenants)
	}
	ucap, uload, err := c.Untenanted(ctx)
	if err != nil {
		return err
	}
	tw := tabwriter.NewWriter(o.stdout, 2, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "TENANT\tCAPACITY\tLOAD\tWAITING\tUNFINISHED")
	if ucap >= 0 {
		fmt.Fprintf(tw, "(untenanted)\t%d\t%d\t-\t-\n", ucap, uload)
	}
	for _, t := range tenants {
		id := t.ID
		if t.Removed {
			id += " (removed)"
		}
		fmt.Fprintf(tw, "%s\t%d\t%d\t%d\t%d\n", id, t.Capacity, t.Load, t.Waiting, t.Unfinished)
	}
	return tw.Flush()
}

func tenantsSet(ctx context.Context, c *queue.Client, o queueOpts) error {
	capacity, err := strconv.Atoi(o.ids[1])
	if err != nil {
		return fmt.Errorf("%w: capacity %q is not a number", errUsage, o.ids[1])
	}
	if err := c.SetTenant(ctx, o.ids[0], capacity); err != nil {
		return err
	}
	fmt.Fprintf(o.stdout, "%s: capacity %d\n", o.ids[0], capacity)
	return nil
}

func tenantsRemove(ctx context.Context, c *queue.Client, o queueOpts) error {
	return eachID(o, "removed (its unfinished tasks still run)", func(id string) error { return c.RemoveTenant(ctx, id) })
}

func tenantsUntenanted(ctx context.Context, c *queue.Client, o queueOpts) error {
	capacity := -1
	if o.ids[0] != "none" {
		var err error
		if capacity, err = strconv.Atoi(o.ids[0]); err != nil {
			return fmt.Errorf("%w: capacity %q is neither a number nor none", errUsage, o.ids[0])
		}
	}
	if err := c.SetUntenantedCapacity(ctx, capacity); err != nil {
		return err
	}
	if capacity < 0 {
		fmt.Fprintln(o.stdout, "untenanted tasks: no cap")
	} else {
		fmt.Fprintf(o.stdout, "untenanted tasks: capacity %d\n", capacity)
	}
	return nil
}
