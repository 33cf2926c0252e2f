package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"text/tabwriter"

	"github.com/shepherd-go/shepherd/pool"
)

func init() {
	commands["jobs"] = command{summary: "list a pool's jobs and their workers", run: runJobs}
}

// jobRow is one job as jobs prints it.
type jobRow struct {
	Key    string `json:"key"`
	Worker string `json:"worker"` // "" while queued or without a live owner
	Node   string `json:"node"`
}

func runJobs(args []string, stdout, stderr io.Writer) int {
	c := newClientFlags("jobs", "jobs -pool NAME [-json]", stderr)
	asJSON := c.fs.Bool("json", false, "print a JSON array")
	if code, ok := parse(c.fs, args); !ok {
		return code
	}
	if code, ok := c.check(stderr, 0); !ok {
		return code
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
