package main

import (
	"context"
	"fmt"

	"github.com/redis/go-redis/v9"
	"github.com/spf13/cobra"

	"github.com/shepherd-go/shepherd/internal/keys"
	"github.com/shepherd-go/shepherd/pool"
)

// poolMoveShardCmd is "pool move-shard": it moves one shard of a pool
// (pool.WithShards), its hash slot with its keys, to another master of
// the Redis Cluster (move_shard.go), as queue move-shard moves a queue's.
func poolMoveShardCmd() *cobra.Command {
	var p poolFlags
	var yes, asJSON bool
	var batch int
	cmd := &cobra.Command{
		Use:   "move-shard --pool NAME SHARD HOST:PORT",
		Short: "move a shard's slot, with its keys, to another master of a Redis Cluster; the shard's calls wait meanwhile (asks for confirmation)",
		Args:  shardAndMaster(pool.MaxShards),
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := p.check(); err != nil {
				return err
			}
			return p.withRedis(func(ctx context.Context, rdb redis.UniversalClient) error {
				if ok, err := pool.Exists(ctx, rdb, p.pool); err != nil {
					return err
				} else if !ok {
					return notFound(ctx, rdb, "pool", p.pool)
				}
				return shardMove{
					kind: "pool", name: p.pool, addr: p.addr, args: args, batch: batch, json: asJSON, stdout: cmd.OutOrStdout(),
					waits: "Its jobs' dispatches, stops and keep-alives wait while its keys move.",
					confirm: func(question string) error {
						if !yes && (asJSON || !confirm(cmd.ErrOrStderr(), question)) {
							return fmt.Errorf("%w: %w", errUsage, errNotConfirmed)
						}
						return nil
					},
					locate: func(ctx context.Context, shard int) (int, int, error) {
						n, err := pool.ShardCount(ctx, rdb, p.pool)
						// Every key of shard i is shepherd:{TAG}:..., TAG its
						// hash tag (pool/layout.go).
						return n, keys.Slot("{" + keys.ShardTag(p.pool, shard) + "}"), err
					},
				}.run(ctx, rdb)
			})
		},
	}
	p.register(cmd.Flags())
	cmd.Flags().BoolVar(&yes, "yes", false, "do not ask for confirmation (required with -json)")
	cmd.Flags().BoolVar(&asJSON, "json", false, "print JSON")
	cmd.Flags().IntVar(&batch, "batch", 100, "keys a MIGRATE moves (`n`)")
	return cmd
}
