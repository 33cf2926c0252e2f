package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"text/tabwriter"

	"github.com/redis/go-redis/v9"
	"github.com/spf13/cobra"

	"github.com/shepherd-go/shepherd/internal/humanize"
	"github.com/shepherd-go/shepherd/pool"
)

// jobRow is one job as jobs prints it.
type jobRow struct {
	Key    string `json:"key"`
	Worker string `json:"worker"` // "" while queued or without a live owner
	Node   string `json:"node"`
}

func jobsCmd() *cobra.Command {
	var p poolFlags
	var asJSON bool
	cmd := &cobra.Command{
		Use:     "jobs --pool NAME [KEY]",
		Short:   "list a pool's jobs and their workers, or show one job",
		GroupID: groupPool,
		Args: func(_ *cobra.Command, args []string) error {
			if len(args) > 1 {
				return usagef("at most one job key, got %d", len(args))
			}
			return nil
		},
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := p.check(); err != nil {
				return err
			}
			if len(args) == 1 {
				return showJob(p, args[0], asJSON, cmd.OutOrStdout())
			}
			return p.withClient(cmd.ErrOrStderr(), func(ctx context.Context, cl *client) error {
				return printJobs(ctx, cl.node, asJSON, cmd.OutOrStdout())
			})
		},
	}
	p.register(cmd.Flags())
	cmd.Flags().BoolVar(&asJSON, "json", false, "print a JSON array (with KEY: one object)")
	return cmd
}

// printJobs prints every job of the pool and its worker.
func printJobs(ctx context.Context, n *pool.Node, asJSON bool, stdout io.Writer) error {
	rows, err := listJobs(ctx, n)
	if err != nil {
		return err
	}
	if asJSON {
		return printJSON(stdout, rows)
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
func showJob(p poolFlags, key string, asJSON bool, stdout io.Writer) error {
	var job *pool.JobInfo
	err := p.withRedis(func(ctx context.Context, rdb redis.UniversalClient) error {
		var err error
		job, err = pool.InspectJob(ctx, rdb, p.pool, key)
		if errors.Is(err, pool.ErrJobNotFound) {
			if ok, xerr := pool.Exists(ctx, rdb, p.pool); xerr == nil && !ok {
				err = notFound(ctx, rdb, "pool", p.pool)
			}
		}
		return err
	})
	if err != nil {
		return err
	}
	if asJSON {
		return printJSON(stdout, job)
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
		started = job.Started.UTC().Format(timeMillis)
	}
	for _, row := range [][2]string{
		{"key", job.Key},
		{"state", fmt.Sprintf("%s for %s", job.State, humanize.Duration(job.Time.Sub(job.Changed)))},
		{"worker", worker},
		{"node", or(job.Node, "-")},
		{"generation", fmt.Sprint(job.Generation)},
		{"attempt", fmt.Sprint(job.Attempt)},
		{"dispatched", job.Created.UTC().Format(timeMillis)},
		{"started", started},
		{"last Start error", or(job.LastError, "-")},
		{"payload", fmt.Sprintf("%d bytes", job.PayloadSize)},
	} {
		fmt.Fprintf(tw, "%s:\t%s\n", row[0], row[1])
	}
	return tw.Flush()
}

// or returns s, or def when s is empty.
func or(s, def string) string {
	if s == "" {
		return def
	}
	return s
}
