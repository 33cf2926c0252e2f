package main

import (
	"context"
	"fmt"
	"io"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/spf13/cobra"

	"github.com/shepherd-go/shepherd/internal/humanize"
	"github.com/shepherd-go/shepherd/pool"
)

// poolSchedulesCmd is "pool schedules": the pool's schedules and
// tickers, as status shows them, alone.
func poolSchedulesCmd() *cobra.Command {
	var p poolFlags
	var asJSON bool
	cmd := &cobra.Command{
		Use:   "schedules --pool NAME",
		Short: "list the pool's schedules (their planner, last plan and its outcome) and cluster tickers",
		Args:  noArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := p.check(); err != nil {
				return err
			}
			return p.inspect(func(ctx context.Context, rdb redis.UniversalClient, st *pool.Stats) error {
				if asJSON {
					return printJSON(cmd.OutOrStdout(), struct {
						Schedules []pool.ScheduleInfo `json:"schedules"`
						Tickers   []pool.TickerInfo   `json:"tickers"`
					}{st.Schedules, st.Tickers})
				}
				if len(st.Schedules)+len(st.Tickers) == 0 {
					fmt.Fprintf(cmd.OutOrStdout(), "pool %s has no schedule and no ticker\n", st.Pool)
					return nil
				}
				printSchedules(cmd.OutOrStdout(), st)
				return nil
			})
		},
	}
	p.register(cmd.Flags())
	cmd.Flags().BoolVar(&asJSON, "json", false, "print JSON")
	return cmd
}

// poolUnscheduleCmd is "pool unschedule NAME": pool.Unschedule.
func poolUnscheduleCmd() *cobra.Command {
	return poolRemoveCmd("unschedule", "schedule", "remove a schedule for every node (the jobs it started keep running)",
		pool.Unschedule)
}

// poolStopTickerCmd is "pool stop-ticker NAME": pool.StopTicker.
func poolStopTickerCmd() *cobra.Command {
	return poolRemoveCmd("stop-ticker", "ticker", "stop a cluster ticker for every node", pool.StopTicker)
}

func poolRemoveCmd(use, what, short string, remove func(context.Context, redis.UniversalClient, string, string) error) *cobra.Command {
	var p poolFlags
	cmd := &cobra.Command{
		Use:   use + " --pool NAME " + strings.ToUpper(what),
		Short: short,
		Args:  rangeArgs(1, 1, "missing "+what+" name"),
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := p.check(); err != nil {
				return err
			}
			return p.inspect(func(ctx context.Context, rdb redis.UniversalClient, _ *pool.Stats) error {
				if err := remove(ctx, rdb, p.pool, args[0]); err != nil {
					return err
				}
				fmt.Fprintf(cmd.OutOrStdout(), "%s %s of pool %s removed\n", what, args[0], p.pool)
				return nil
			})
		},
	}
	p.register(cmd.Flags())
	return cmd
}

// printSchedules prints the schedules and tickers of st.
func printSchedules(w io.Writer, st *pool.Stats) {
	tw := tabwriter.NewWriter(w, 2, 4, 2, ' ', 0)
	fmt.Fprintf(w, "\nschedules: %d\n", len(st.Schedules))
	if len(st.Schedules) > 0 {
		fmt.Fprintln(tw, "  SCHEDULE\tEVERY\tPLANNER\tLAST PLAN\tTOOK\tKEYS\tPLANNED\tSTARTED\tSTOPPED\tCHANGED\tFAILED\tERROR")
	}
	for _, s := range st.Schedules {
		errText := s.LastError
		if errText == "" && len(s.Errors) > 0 {
			errText = s.Errors[0]
		}
		fmt.Fprintf(tw, "  %s\t%s\t%s\t%s\t%s\t%d\t%d\t%d\t%d\t%d\t%d\t%s\n", s.Name, humanize.Duration(s.Interval),
			orDash(s.Planner), when(s.LastRun), humanize.Duration(s.LastTook), s.Keys, s.Planned, s.Started, s.Stopped,
			s.Changed, s.Failed, orDash(errText))
	}
	tw.Flush()
	fmt.Fprintf(w, "\ntickers: %d\n", len(st.Tickers))
	if len(st.Tickers) > 0 {
		fmt.Fprintln(tw, "  TICKER\tEVERY\tHOLDER\tLAST TICK\tNEXT TICK\tTICKS\tSKIPPED")
	}
	for _, t := range st.Tickers {
		fmt.Fprintf(tw, "  %s\t%s\t%s\t%s\t%s\t%d\t%d\n", t.Name, humanize.Duration(t.Period), orDash(t.Holder),
			when(t.Last), when(t.Next), t.Ticks, t.Skipped)
	}
	tw.Flush()
}

func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

func when(t time.Time) string {
	if t.IsZero() {
		return "-"
	}
	return t.UTC().Format(timeMillis)
}

// inspect connects, reads the pool (a not-found error when it does not
// exist) and runs f.
func (p *poolFlags) inspect(f func(ctx context.Context, rdb redis.UniversalClient, st *pool.Stats) error) error {
	return p.withRedis(func(ctx context.Context, rdb redis.UniversalClient) error {
		st, err := pool.Inspect(ctx, rdb, p.pool)
		if err != nil {
			return err
		}
		if !st.Exists {
			return notFound(ctx, rdb, "pool", p.pool)
		}
		return f(ctx, rdb, st)
	})
}

// withRedis connects to -redis and runs f, within -timeout and until
// interrupted, without joining the pool.
func (p *poolFlags) withRedis(f func(ctx context.Context, rdb redis.UniversalClient) error) error {
	ctx, cancel := interruptible()
	defer cancel()
	ctx, cancelT := context.WithTimeout(ctx, p.timeout)
	defer cancelT()
	rdb, err := connect(ctx, p.addr)
	if err != nil {
		return err
	}
	defer rdb.Close()
	return f(ctx, rdb)
}
