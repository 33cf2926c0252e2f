package main

import (
	"context"
	"fmt"

	"github.com/spf13/cobra"

	"github.com/shepherd-go/shepherd/queue"
)

// moveShardCmd is "shepherd queue move-shard": it moves one shard's hash
// slot, with its keys, to another master of the Redis Cluster
// (move_shard.go), so that a cluster that gained a master can take
// shards of a queue made with more shards than it had masters.
func moveShardCmd(o *queueOpts) *cobra.Command {
	cmd := onQueue(o, "move-shard --queue NAME SHARD HOST:PORT",
		"move a shard's slot, with its keys, to another master of a Redis Cluster; the shard pauses meanwhile (asks for confirmation)",
		shardAndMaster(queue.MaxShards), queueMoveShard)
	cmd.Flags().IntVar(&o.batch, "batch", 100, "move-shard: keys a MIGRATE moves (`n`)")
	return cmd
}

// queueMoveShard moves shard SHARD of the queue to the master at
// HOST:PORT.
func queueMoveShard(ctx context.Context, c *queue.Client, o queueOpts) error {
	return shardMove{
		kind: "queue", name: c.Name(), addr: o.addr, args: o.ids, batch: o.batch, json: o.json, stdout: o.stdout,
		waits: "Its tasks wait while its keys move.",
		confirm: func(question string) error {
			if !confirmed(o, question) {
				return fmt.Errorf("%w: not confirmed", errUsage)
			}
			return nil
		},
		locate: func(ctx context.Context, shard int) (int, int, error) {
			st, err := c.Stats(ctx)
			if err != nil {
				return 0, 0, err
			}
			if shard >= st.Shards {
				return st.Shards, 0, nil
			}
			return st.Shards, st.PerShard[shard].Slot, nil
		},
	}.run(ctx, o.rdb)
}
