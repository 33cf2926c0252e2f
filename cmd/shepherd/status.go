package main

import (
	"fmt"
	"io"
	"slices"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/shepherd-go/shepherd/internal/humanize"
	"github.com/shepherd-go/shepherd/pool"
)

// statusOpts are the flags of status.
type statusOpts struct {
	addr, pool  string
	json, watch bool
	exact       bool
	interval    time.Duration
	count       int
}

func statusCmd() *cobra.Command {
	var o statusOpts
	cmd := &cobra.Command{
		Use:     "status --pool NAME",
		Short:   "show what runs where in a pool, and what is stuck",
		GroupID: groupPool,
		Args:    noArgs,
		RunE:    func(cmd *cobra.Command, _ []string) error { return runStatus(cmd, o) },
	}
	fs := cmd.Flags()
	redisFlag(fs, &o.addr)
	fs.StringVar(&o.pool, "pool", "", "the pool's `name` (required)")
	fs.BoolVar(&o.json, "json", false, "print one JSON object per snapshot")
	fs.BoolVar(&o.watch, "watch", false, "refresh until interrupted")
	fs.BoolVar(&o.exact, "exact", false, "read every job record (pool.Inspect): every key of every worker, at a cost that grows with the jobs; without it a pool of more than 2,000 jobs is read from its workers' reports (pool.Summary)")
	fs.DurationVar(&o.interval, "interval", time.Second, "refresh `period` with -watch")
	fs.IntVar(&o.count, "count", 0, "with -watch, stop after `n` snapshots (0: until interrupted)")
	return cmd
}

func runStatus(cmd *cobra.Command, o statusOpts) error {
	switch {
	case o.pool == "":
		return usagef("-pool is required")
	case o.interval <= 0 || o.count < 0:
		return usagef("-interval must be positive, -count not negative")
	}
	stdout := cmd.OutOrStdout()
	ctx, cancel := interruptible()
	defer cancel()
	rdb, err := connect(ctx, o.addr)
	if err != nil {
		return err
	}
	defer rdb.Close()

	clear := o.watch && !o.json && isTerminal(stdout)
	read := pool.Summary
	if o.exact {
		read = pool.Inspect
	}
	for i := 1; ; i++ {
		st, err := read(ctx, rdb, o.pool)
		if err != nil {
			if ctx.Err() != nil {
				return nil // interrupted while watching
			}
			return err
		}
		if !st.Exists && i == 1 {
			return notFound(ctx, rdb, "pool", o.pool)
		}
		if clear {
			fmt.Fprint(stdout, "\033[H\033[2J")
		}
		if o.json {
			if err := printJSON(stdout, st); err != nil {
				return err
			}
		} else {
			printStatus(stdout, st)
		}
		if !o.watch || (o.count > 0 && i >= o.count) {
			return nil
		}
		select {
		case <-ctx.Done():
			return nil
		case <-time.After(o.interval):
		}
	}
}

// printStatus writes a snapshot for people.
func printStatus(w io.Writer, st *pool.Stats) {
	fmt.Fprintf(w, "pool %s at %s (Redis time); WorkerTTL %s, PendingJobTTL %s, MaxQueuedJobs %d\n",
		st.Pool, st.Time.UTC().Format(timeMillis), humanize.Duration(st.WorkerTTL), humanize.Duration(st.PendingJobTTL), st.MaxQueuedJobs)
	if st.Shards > 1 {
		fmt.Fprintf(w, "  %d shards (added up below; worker slots are shard 0's)\n", st.Shards)
	}
	fmt.Fprintf(w, "\nnodes: %d\n", len(st.Nodes))
	tw := tabwriter.NewWriter(w, 2, 4, 2, ' ', 0)
	if len(st.Nodes) > 0 {
		fmt.Fprintln(tw, "  NODE\tKIND\tHOST\tPID\tHEALTH")
	}
	for _, n := range st.Nodes {
		kind := "full"
		if n.Client {
			kind = "client"
		}
		host, pid := "-", "-"
		if n.Host != "" {
			host, pid = n.Host, fmt.Sprint(n.PID)
		}
		fmt.Fprintf(tw, "  %s\t%s\t%s\t%s\t%s\n", n.ID, kind, host, pid, health(n.Healthy, n.LastSeen, n.Age))
	}
	tw.Flush()
	fmt.Fprintf(w, "\nworkers: %d (%d busy, %d idle)\n", len(st.Workers), st.WorkersBusy, st.WorkersIdle)
	if len(st.Workers) > 0 {
		fmt.Fprintln(tw, "  SLOT\tWORKER\tNODE\tHEALTH\tJOBS\tKEYS")
	}
	for _, ws := range st.Workers {
		keys := strings.Join(sample(ws.Keys, keySample, ws.Jobs), " ")
		h := health(ws.Healthy, ws.LastSeen, ws.HealthAge)
		if !ws.RestartingUntil.IsZero() {
			h = "restarting until " + ws.RestartingUntil.UTC().Format(timeMillis)
		}
		fmt.Fprintf(tw, "  %d\t%s\t%s\t%s\t%d\t%s\n", ws.Slot, ws.ID, ws.Node, h, ws.Jobs, keys)
	}
	tw.Flush()
	oldest := "-"
	if st.Pending > 0 {
		oldest = humanize.Duration(st.OldestPending)
	}
	fmt.Fprintf(w, "\nqueue: %d waiting, %d pending (unacked), oldest pending %s\n", st.QueueDepth, st.Pending, oldest)
	fmt.Fprintf(w, "jobs: %d total, %d running, %d without a live owner\n", st.Jobs, st.Running, st.OrphanJobs)
	if st.OrphanJobs > 0 {
		fmt.Fprintf(w, "  no live owner: %s\n", strings.Join(sample(st.Orphans, 10, st.OrphanJobs), " "))
	}
	if st.Sampled {
		fmt.Fprintln(w, "  (running, each worker's jobs and those without a live owner as the workers reported them at their last keep-alive, with the first of their keys: -exact reads every job)")
	}
	fmt.Fprintf(w, "since the pool began: %d starts ok, %d starts failed, %d jobs recovered\n", st.Started, st.StartsFailed, st.Recovered)
	for i, r := range st.Recoveries {
		if i == recoveriesShown {
			fmt.Fprintf(w, "  ... %d earlier recoveries\n", len(st.Recoveries)-i)
			break
		}
		dead := "-"
		if len(r.Workers) > 0 {
			dead = strings.Join(r.Workers, " ")
		}
		fmt.Fprintf(w, "  recovered %d jobs at %s; workers declared dead: %s\n", r.Jobs, r.Time.UTC().Format(timeMillis), dead)
	}
	if len(st.Schedules)+len(st.Tickers) > 0 {
		printSchedules(w, st)
	}
}

// recoveriesShown is how many of the recent recoveries status prints.
const recoveriesShown = 3

// keySample is how many of a worker's job keys status prints.
const keySample = 5

// health renders a keep-alive: "ok 1.2s ago", "DEAD 40s ago", or "DEAD
// (no keep-alive)".
func health(healthy bool, seen time.Time, age time.Duration) string {
	switch {
	case healthy:
		return fmt.Sprintf("ok %s ago", humanize.Duration(age))
	case seen.IsZero():
		return "DEAD (no keep-alive)"
	default:
		return fmt.Sprintf("DEAD %s ago", humanize.Duration(age))
	}
}

// sample returns the first n of s, with "..." when there are more: more
// of s, or more than s holds (total, when s is a sample of total items).
func sample(s []string, n int, total ...int) []string {
	all := len(s)
	if len(total) > 0 {
		all = max(all, total[0])
	}
	out := s[:min(n, len(s))]
	if all > len(out) {
		out = append(slices.Clip(out), "...")
	}
	return out
}
