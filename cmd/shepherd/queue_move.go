package main

import (
	"context"
	"fmt"
	"net"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/spf13/cobra"

	"github.com/shepherd-go/shepherd/internal/slotmove"
	"github.com/shepherd-go/shepherd/queue"
)

// moveShardCmd is "shepherd queue move-shard": it moves one shard's hash
// slot, with its keys, to another master of the Redis Cluster
// (internal/slotmove), so that a cluster that gained a master can take
// shards of a queue made with more shards than it had masters.
func moveShardCmd(o *queueOpts) *cobra.Command {
	cmd := onQueue(o, "move-shard --queue NAME SHARD HOST:PORT",
		"move a shard's slot, with its keys, to another master of a Redis Cluster; the shard pauses meanwhile (asks for confirmation)",
		moveShardArgs, queueMoveShard)
	cmd.Flags().IntVar(&o.batch, "batch", 100, "move-shard: keys a MIGRATE moves (`n`)")
	return cmd
}

// moveShardArgs checks move-shard's arguments: a shard and an address.
func moveShardArgs(cmd *cobra.Command, args []string) error {
	if err := rangeArgs(2, 2, "want a shard and the address of the master to move it to")(cmd, args); err != nil {
		return err
	}
	if n, err := strconv.Atoi(args[0]); err != nil || n < 0 || n >= queue.MaxShards {
		return usagef("shard %q: want 0 to %d", args[0], queue.MaxShards-1)
	}
	host, p, err := net.SplitHostPort(args[1])
	if port, perr := strconv.Atoi(p); err != nil || perr != nil || host == "" || port < 1 || port > 65535 {
		return usagef("master %q: want HOST:PORT", args[1])
	}
	return nil
}

// clusterNode is a master of the cluster, as a move needs it.
type clusterNode struct {
	id, addr string
	slots    [][2]int
}

// liveMasters returns the cluster's masters that are online, those
// serving no slot yet included, as the node the client asks sees them
// (CLUSTER SHARDS).
func liveMasters(ctx context.Context, cc *redis.ClusterClient) ([]clusterNode, error) {
	shards, err := cc.ClusterShards(ctx).Result()
	if err != nil {
		return nil, fmt.Errorf("CLUSTER SHARDS: %w", err)
	}
	var out []clusterNode
	for _, sh := range shards {
		for _, n := range sh.Nodes {
			if n.Role != "master" || n.Health != "online" {
				continue
			}
			c := clusterNode{id: n.ID, addr: net.JoinHostPort(n.IP, strconv.FormatInt(n.Port, 10))}
			for _, r := range sh.Slots {
				c.slots = append(c.slots, [2]int{int(r.Start), int(r.End)})
			}
			out = append(out, c)
		}
	}
	return out, nil
}

func (n clusterNode) serves(slot int) bool {
	for _, r := range n.slots {
		if slot >= r[0] && slot <= r[1] {
			return true
		}
	}
	return false
}

// queueMoveShard moves shard SHARD of the queue to the master at
// HOST:PORT (slotmove.Move).
func queueMoveShard(ctx context.Context, c *queue.Client, o queueOpts) error {
	cc, ok := o.rdb.(*redis.ClusterClient)
	if !ok {
		return fmt.Errorf("%w: move-shard moves a shard between the masters of a Redis Cluster; %s is not one", errUsage, redisAddr(o.addr))
	}
	if o.batch < 1 {
		return usagef("-batch must be at least 1")
	}
	shard, _ := strconv.Atoi(o.ids[0])
	to := o.ids[1]
	st, err := c.Stats(ctx)
	if err != nil {
		return err
	}
	if shard >= st.Shards {
		return usagef("queue %s has %d shards: shard %d does not exist", c.Name(), st.Shards, shard)
	}
	slot := st.PerShard[shard].Slot
	masters, err := liveMasters(ctx, cc)
	if err != nil {
		return err
	}
	var from, dest *clusterNode
	var addrs []string
	for i := range masters {
		addrs = append(addrs, masters[i].addr)
		if masters[i].addr == to {
			dest = &masters[i]
		}
		if masters[i].serves(slot) {
			from = &masters[i]
		}
	}
	switch {
	case dest == nil:
		slices.Sort(addrs)
		return usagef("%s is not a master of the cluster; its masters are %s", to, strings.Join(addrs, ", "))
	case from == nil:
		return fmt.Errorf("no master serves slot %d of shard %d (a move left half-done? finish it: redis-cli --cluster fix)", slot, shard)
	}
	result := struct {
		Queue   string  `json:"queue"`
		Shard   int     `json:"shard"`
		Slot    int     `json:"slot"`
		From    string  `json:"from"`
		To      string  `json:"to"`
		Keys    int     `json:"keys"`
		Seconds float64 `json:"seconds"`
	}{Queue: c.Name(), Shard: shard, Slot: slot, From: from.addr, To: dest.addr}
	if from.id == dest.id {
		if o.json {
			return printJSON(o.stdout, result)
		}
		fmt.Fprintf(o.stdout, "shard %d of queue %s (slot %d) is on %s already\n", shard, c.Name(), slot, to)
		return nil
	}
	if !confirmed(o, fmt.Sprintf("Move shard %d of queue %q (slot %d) from %s to %s? Its tasks wait while its keys move.", shard, c.Name(), slot, from.addr, to)) {
		return fmt.Errorf("%w: not confirmed", errUsage)
	}
	opt := cc.Options()
	client := func(addr string) *redis.Client {
		return redis.NewClient(&redis.Options{Addr: addr, Username: opt.Username, Password: opt.Password, TLSConfig: opt.TLSConfig})
	}
	mv := slotmove.Move{Slot: slot, From: client(from.addr), To: client(dest.addr), ToAddr: dest.addr,
		Batch: o.batch, Username: opt.Username, Password: opt.Password}
	defer mv.From.Close()
	defer mv.To.Close()
	for _, m := range masters {
		if m.id != from.id && m.id != dest.id {
			oc := client(m.addr)
			defer oc.Close()
			mv.Others = append(mv.Others, oc)
		}
	}
	began := time.Now()
	result.Keys, err = mv.Run(ctx)
	result.Seconds = time.Since(began).Seconds()
	if err != nil {
		return fmt.Errorf("%w; shard %d of queue %s refuses its calls until the move is finished: run this command again, or redis-cli --cluster fix", err, shard, c.Name())
	}
	if o.json {
		return printJSON(o.stdout, result)
	}
	fmt.Fprintf(o.stdout, "moved shard %d of queue %s (slot %d): %d keys from %s to %s in %.1fs\n",
		shard, c.Name(), slot, result.Keys, from.addr, to, result.Seconds)
	return nil
}
