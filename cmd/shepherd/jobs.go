package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"text/tabwriter"
	"time"

	"github.com/shepherd-go/shepherd/pool"
)

func init() {
	commands["jobs"] = command{summary: "list a pool's jobs and their workers, or show one job", run: runJobs}
}

// jobRow is one job as jobs prints it.
type jobRow struct {
	Key    string `json:"key"`
	Worker string `json:"worker"` // "" while queued or without a live owner
	Node   string `json:"node"`
}

func runJobs(args []string, stdout, stderr io.Writer) int {
	c := newClientFlags("jobs", "jobs -pool NAME [-json] [KEY]", stderr)
	asJSON := c.fs.Bool("json", false, "print a JSON array (with KEY: one object)")
	if code, ok := parse(c.fs, args); !ok {
		return code
	}
	if code, ok := c.check(stderr, 0); !ok {
		return code
	}
	switch c.fs.NArg() {
	case 0:
	case 1:
		return showJob(c, c.fs.Arg(0), *asJSON, stdout, stderr)
	default:
		return usageError(c.fs, stderr, "at most one job key, got %d", c.fs.NArg())
	}
	return c.withClient(stderr, func(ctx context.Context, cl *client) error {
		rows, err := listJobs(ctx, cl.node)
		if err != nil {
			return err
		}
		if *asJSON {
			return json.NewEncoder(stdout).Encode(rows)
		}
		tw := tabwriter.NewWriter(stdout, 2, 4, 2, ' ', 0)
		fmt.Fprintln(tw, "KEY\tWORKER\tNODE")
		for _, r := range rows {
			if r.Worker == "" {
				r.Worker, r.Node = "(queued or no live owner)", "-"
			}
			fmt.Fprintf(tw, "%s\t%s\t%s\n", r.Key, r.Worker, r.Node)
		}
		return tw.Flush()
	})
}

// listJobs joins JobKeys with the workers of Stats.
func listJobs(ctx context.Context, n *pool.Node) ([]jobRow, error) {
	keys, err := n.JobKeys(ctx)
	if err != nil {
		return nil, err
	}
	st, err := n.Stats(ctx)
	if err != nil {
		return nil, err
	}
	owner := map[string]pool.WorkerStats{}
	for _, w := range st.Workers {
		if !w.Healthy {
			continue
		}
		for _, k := range w.Keys {
			owner[k] = w
		}
	}
	rows := make([]jobRow, 0, len(keys))
	for _, k := range keys {
		w := owner[k]
		rows = append(rows, jobRow{Key: k, Worker: w.ID, Node: w.Node})
	}
	return rows, nil
}

// showJob prints one job, read with pool.InspectJob: it joins nothing.
func showJob(c *clientFlags, key string, asJSON bool, stdout, stderr io.Writer) int {
	ctx, cancel := interruptible()
	defer cancel()
	ctx, cancelT := context.WithTimeout(ctx, *c.timeout)
	defer cancelT()
	rdb, err := connect(ctx, *c.addr)
	if err != nil {
		return fail(stderr, "jobs", err)
	}
	defer rdb.Close()
	job, err := pool.InspectJob(ctx, rdb, *c.pool, key)
	if errors.Is(err, pool.ErrJobNotFound) {
		if ok, xerr := pool.Exists(ctx, rdb, *c.pool); xerr == nil && !ok {
			err = poolNotFound(*c.pool)
		}
	}
	if err != nil {
		return fail(stderr, "jobs", err)
	}
	if asJSON {
		if err := json.NewEncoder(stdout).Encode(job); err != nil {
			return fail(stderr, "jobs", err)
		}
		return exitOK
	}
	tw := tabwriter.NewWriter(stdout, 2, 4, 2, ' ', 0)
	worker := "-"
	if job.Worker != "" {
		worker = job.Worker + " (dead)"
		if job.WorkerHealthy {
			worker = job.Worker + " (ok)"
		}
	}
	started := "-"
	if !job.Started.IsZero() {
		started = job.Started.UTC().Format(time.RFC3339Nano)
	}
	for _, row := range [][2]string{
		{"key", job.Key},
		{"state", fmt.Sprintf("%s for %s", job.State, round(job.Time.Sub(job.Changed)))},
		{"worker", worker},
		{"node", or(job.Node, "-")},
		{"generation", fmt.Sprint(job.Generation)},
		{"attempt", fmt.Sprint(job.Attempt)},
		{"dispatched", job.Created.UTC().Format(time.RFC3339Nano)},
		{"started", started},
		{"last Start error", or(job.LastError, "-")},
		{"payload", fmt.Sprintf("%d bytes", job.PayloadSize)},
	} {
		fmt.Fprintf(tw, "%s:\t%s\n", row[0], row[1])
	}
	if err := tw.Flush(); err != nil {
		return fail(stderr, "jobs", err)
	}
	return exitOK
}

// or returns s, or def when s is empty.
func or(s, def string) string {
	if s == "" {
		return def
	}
	return s
}
