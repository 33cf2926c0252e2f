package main

import (
	"context"
	"fmt"
	"io"
	"net"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/spf13/cobra"

	"github.com/shepherd-go/shepherd/internal/slotmove"
)

// What `queue move-shard` and `pool move-shard` share: the arguments,
// the cluster's masters, and the move of one shard's slot with its keys
// (internal/slotmove).

// shardAndMaster checks move-shard's arguments: a shard (0 to
// maxShards-1) and the address of a master.
func shardAndMaster(maxShards int) cobra.PositionalArgs {
	return func(cmd *cobra.Command, args []string) error {
		if err := rangeArgs(2, 2, "want a shard and the address of the master to move it to")(cmd, args); err != nil {
			return err
		}
		if n, err := strconv.Atoi(args[0]); err != nil || n < 0 || n >= maxShards {
			return usagef("shard %q: want 0 to %d", args[0], maxShards-1)
		}
		host, p, err := net.SplitHostPort(args[1])
		if port, perr := strconv.Atoi(p); err != nil || perr != nil || host == "" || port < 1 || port > 65535 {
			return usagef("master %q: want HOST:PORT", args[1])
		}
		return nil
	}
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

// shardMove is one run of move-shard: shard SHARD of the pool or queue
// (kind) called name, to the master at HOST:PORT (args, checked by
// shardAndMaster).
type shardMove struct {
	kind, name string // "queue" or "pool", and its name
	addr       string // -redis, for the error of a server that is no cluster
	args       []string
	batch      int
	json       bool
	stdout     io.Writer
	// waits says, in the question, what waits while the keys move.
	waits string
	// confirm asks the question, unless -yes: nil if the operator
	// confirmed.
	confirm func(question string) error
	// locate returns the unit's shard count and, when shard is below it,
	// the slot of shard.
	locate func(ctx context.Context, shard int) (shards, slot int, err error)
}

// MovedShard is what move-shard prints with -json, after the unit's name
// ({"queue": NAME} or {"pool": NAME}).
type MovedShard struct {
	Shard   int     `json:"shard"`
	Slot    int     `json:"slot"`
	From    string  `json:"from"`
	To      string  `json:"to"`
	Keys    int     `json:"keys"`
	Seconds float64 `json:"seconds"`
}

// named returns r after the unit's name, for -json.
func (r MovedShard) named(kind, name string) any {
	if kind == "pool" {
		return struct {
			Pool string `json:"pool"`
			MovedShard
		}{name, r}
	}
	return struct {
		Queue string `json:"queue"`
		MovedShard
	}{name, r}
}

// run moves the shard (slotmove.Move) with rdb, a client of the cluster.
func (m shardMove) run(ctx context.Context, rdb redis.UniversalClient) error {
	cc, ok := rdb.(*redis.ClusterClient)
	if !ok {
		return fmt.Errorf("%w: move-shard moves a shard between the masters of a Redis Cluster; %s is not one", errUsage, redisAddr(m.addr))
	}
	if m.batch < 1 {
		return usagef("-batch must be at least 1")
	}
	shard, _ := strconv.Atoi(m.args[0])
	to := m.args[1]
	shards, slot, err := m.locate(ctx, shard)
	if err != nil {
		return err
	}
	if shard >= shards {
		return usagef("%s %s has %d shards: shard %d does not exist", m.kind, m.name, shards, shard)
	}
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
	result := MovedShard{Shard: shard, Slot: slot, From: from.addr, To: dest.addr}
	if from.id == dest.id {
		if m.json {
			return printJSON(m.stdout, result.named(m.kind, m.name))
		}
		fmt.Fprintf(m.stdout, "shard %d of %s %s (slot %d) is on %s already\n", shard, m.kind, m.name, slot, to)
		return nil
	}
	if err := m.confirm(fmt.Sprintf("Move shard %d of %s %q (slot %d) from %s to %s? %s", shard, m.kind, m.name, slot, from.addr, to, m.waits)); err != nil {
		return err
	}
	opt := cc.Options()
	client := func(addr string) *redis.Client {
		return redis.NewClient(&redis.Options{Addr: addr, Username: opt.Username, Password: opt.Password, TLSConfig: opt.TLSConfig})
	}
	mv := slotmove.Move{Slot: slot, From: client(from.addr), To: client(dest.addr), ToAddr: dest.addr,
		Batch: m.batch, Username: opt.Username, Password: opt.Password}
	defer mv.From.Close()
	defer mv.To.Close()
	for _, n := range masters {
		if n.id != from.id && n.id != dest.id {
			oc := client(n.addr)
			defer oc.Close()
			mv.Others = append(mv.Others, oc)
		}
	}
	began := time.Now()
	result.Keys, err = mv.Run(ctx)
	result.Seconds = time.Since(began).Seconds()
	if err != nil {
		return fmt.Errorf("%w; shard %d of %s %s refuses its calls until the move is finished: run this command again, or redis-cli --cluster fix", err, shard, m.kind, m.name)
	}
	if m.json {
		return printJSON(m.stdout, result.named(m.kind, m.name))
	}
	fmt.Fprintf(m.stdout, "moved shard %d of %s %s (slot %d): %d keys from %s to %s in %.1fs\n",
		shard, m.kind, m.name, slot, result.Keys, from.addr, to, result.Seconds)
	return nil
}
