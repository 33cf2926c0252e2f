package main

import (
	"context"
	"errors"
	"fmt"

	"github.com/redis/go-redis/v9"
	"github.com/spf13/cobra"

	"github.com/shepherd-go/shepherd/pool"
)

// poolCmd is "shepherd pool": what acts on a pool as a whole, beside the
// pool commands that act on its jobs (dispatch, stop, shutdown...).
func poolCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:     "pool",
		Short:   "a pool as a whole: its schedules and tickers, move-shard, delete",
		GroupID: groupPool,
		Args:    cobra.ArbitraryArgs,
		RunE:    requireSubcommand,
	}
	cmd.AddCommand(poolDeleteCmd(), poolSchedulesCmd(), poolUnscheduleCmd(), poolStopTickerCmd(), poolMoveShardCmd())
	return cmd
}

// poolDeleteCmd is "pool delete": pool.Delete, after a confirmation
// unless -yes; refused while nodes are live unless -force.
func poolDeleteCmd() *cobra.Command {
	var p poolFlags
	var yes, force, asJSON bool
	cmd := &cobra.Command{
		Use:   "delete --pool NAME",
		Short: "delete a pool whose nodes are gone, with its jobs (asks for confirmation; refused while a node is live, unless -force)",
		Args:  noArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := p.check(); err != nil {
				return err
			}
			if !yes && (asJSON || !confirm(cmd.ErrOrStderr(), fmt.Sprintf("delete pool %q and its jobs' records?", p.pool))) {
				return fmt.Errorf("%w: %w", errUsage, errNotConfirmed)
			}
			return p.withRedis(func(ctx context.Context, rdb redis.UniversalClient) error {
				if ok, err := pool.Exists(ctx, rdb, p.pool); err != nil {
					return err
				} else if !ok {
					return notFound(ctx, rdb, "pool", p.pool)
				}
				var opts []pool.DeleteOption
				if force {
					opts = append(opts, pool.DeleteEvenIfLive())
				}
				n, err := pool.Delete(ctx, rdb, p.pool, opts...)
				if errors.Is(err, pool.ErrInUse) {
					return fmt.Errorf("%w; shepherd shutdown stops its jobs and deletes it, -force deletes it anyway", err)
				}
				if err != nil {
					return err
				}
				if asJSON {
					return printJSON(cmd.OutOrStdout(), struct {
						Deleted int `json:"deleted_keys"`
					}{n})
				}
				fmt.Fprintf(cmd.OutOrStdout(), "pool %s deleted (%d keys)\n", p.pool, n)
				return nil
			})
		},
	}
	p.register(cmd.Flags())
	cmd.Flags().BoolVar(&yes, "yes", false, "do not ask for confirmation (required with -json)")
	cmd.Flags().BoolVar(&force, "force", false, "delete even while nodes are live")
	cmd.Flags().BoolVar(&asJSON, "json", false, "print JSON")
	return cmd
}
