package main

import (
	"context"
	"fmt"
	"io"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/shepherd-go/shepherd/dashboard"
)

func poolsCmd() *cobra.Command {
	var addr string
	var asJSON bool
	cmd := &cobra.Command{
		Use:     "pools",
		Short:   "list the pools and queues a Redis holds, with their health",
		GroupID: groupOther,
		Args:    noArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return runPools(cmd.OutOrStdout(), addr, asJSON)
		},
	}
	redisFlag(cmd.Flags(), &addr)
	cmd.Flags().BoolVar(&asJSON, "json", false, "print one JSON object")
	return cmd
}

// runPools prints what the dashboard's overview shows (its JSON twin
// with -json).
func runPools(stdout io.Writer, addr string, asJSON bool) error {
	ctx, cancel := interruptible()
	defer cancel()
	ctx, cancelT := context.WithTimeout(ctx, 30*time.Second)
	defer cancelT()
	rdb, err := connect(ctx, addr)
	if err != nil {
		return err
	}
	defer rdb.Close()
	l, err := dashboard.List(ctx, rdb)
	if err != nil {
		return err
	}
	if asJSON {
		return printJSON(stdout, l)
	}
	tw := tabwriter.NewWriter(stdout, 2, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "POOL\tHEALTH\tNODES LIVE\tWORKERS LIVE\tJOBS\tQUEUED\tNO LIVE OWNER")
	for _, p := range l.Pools {
		fmt.Fprintf(tw, "%s\t%s\t%d/%d\t%d/%d\t%d\t%d\t%d\n", p.Name, health3(p.Health, p.Problem, p.Error),
			p.NodesHealthy, p.Nodes, p.WorkersHealthy, p.Workers, p.Jobs, p.Queued, p.Orphans)
	}
	fmt.Fprintln(tw)
	fmt.Fprintln(tw, "QUEUE\tHEALTH\tPROCESSES\tBUSY/WORKERS\tAVAILABLE\tIN FLIGHT\tDEAD")
	for _, q := range l.Queues {
		fmt.Fprintf(tw, "%s\t%s\t%d\t%d/%d\t%d\t%d\t%d\n", q.Name, health3(q.Health, q.Problem, q.Error),
			q.Processes, q.Busy, q.Workers, q.Available, q.InFlight, q.Dead)
	}
	return tw.Flush()
}

// health3 renders a listed health with its reason.
func health3(health, problem, errText string) string {
	switch {
	case errText != "":
		return health + " (" + errText + ")"
	case problem != "":
		return health + " (" + problem + ")"
	}
	return health
}
