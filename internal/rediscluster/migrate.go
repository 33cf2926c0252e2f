package rediscluster

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"slices"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"
)

// AddMaster starts one more redis-server in cluster mode, has the cluster
// meet it (CLUSTER MEET) and waits until every live node knows it and
// reports cluster_state:ok. It serves no slot until MoveSlot gives it
// some. It returns its node index. Masters() keeps counting the masters
// Start made; MasterNodes counts the added node once it serves a slot.
func (c *Cluster) AddMaster(ctx context.Context) (int, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closed {
		return -1, errors.New("rediscluster: add a master to a closed cluster")
	}
	dir, err := os.MkdirTemp("", "rediscluster-")
	if err != nil {
		return -1, fmt.Errorf("rediscluster: data dir: %w", err)
	}
	var path string
	if len(c.nodes) > 0 {
		path = c.nodes[0].path
	}
	n := &node{cfg: &c.cfg, path: path, dir: dir}
	if err := n.start(ctx); err != nil {
		_ = os.RemoveAll(dir)
		return -1, err
	}
	c.nodes = append(c.nodes, n)
	i := len(c.nodes) - 1
	c.spare = append(c.spare, i)
	c.direct = append(c.direct, redis.NewClient(&redis.Options{Addr: n.addr(), MaintNotificationsConfig: noMaintNotifications()}))
	c.probes = append(c.probes, redis.NewClient(&redis.Options{Addr: n.addr(), MaxRetries: -1, MaintNotificationsConfig: noMaintNotifications()}))
	var via int = -1
	for _, j := range c.live() {
		if j != i {
			via = j
			break
		}
	}
	if via < 0 {
		return -1, errors.New("rediscluster: add a master: no live node to meet it")
	}
	// The node's bus port is not its port + 10000 (node.args): MEET
	// names it (Redis 7).
	if err := c.probes[via].Do(ctx, "CLUSTER", "MEET", "127.0.0.1", n.port, n.bus).Err(); err != nil {
		return -1, fmt.Errorf("rediscluster: CLUSTER MEET %s: %w", n.addr(), err)
	}
	return i, c.waitOK(ctx)
}

// MoveSlot moves slot and its keys to node to, a master (one of Start's,
// or one AddMaster added), as `redis-cli --cluster reshard` moves a slot:
// CLUSTER SETSLOT IMPORTING on to and MIGRATING on its master, then
// GETKEYSINSLOT and MIGRATE batch keys at a time (pausing pace between two
// batches, to hold the slot open longer in a test; 0 for none) until none
// is left, then SETSLOT NODE on to, on the old master and on every other
// master. It waits until every live node agrees that to serves the slot.
// Clients learn it from the MOVED replies of the old master. Moving a
// slot to the master that serves it is a no-op.
func (c *Cluster) MoveSlot(ctx context.Context, slot, to, batch int, pace time.Duration) error {
	if slot < 0 || slot >= Slots {
		return fmt.Errorf("rediscluster: slot %d: want 0 to %d", slot, Slots-1)
	}
	if batch < 1 {
		return fmt.Errorf("rediscluster: move slot %d: batch %d: want at least 1 key a MIGRATE", slot, batch)
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closed {
		return errors.New("rediscluster: move a slot of a closed cluster")
	}
	live := c.live()
	if !slices.Contains(live, to) {
		return fmt.Errorf("rediscluster: move slot %d to node %d: not a live node", slot, to)
	}
	spans, err := c.slots(ctx, to)
	if err != nil {
		return fmt.Errorf("rediscluster: move slot %d: %w", slot, err)
	}
	from := -1
	for _, s := range spans {
		if slot >= s.start && slot <= s.end {
			from = s.node
		}
	}
	if from < 0 {
		return fmt.Errorf("rediscluster: move slot %d: no node serves it", slot)
	}
	if from == to {
		return nil
	}
	ids := map[int]string{}
	for _, i := range live {
		id, err := c.probes[i].Do(ctx, "CLUSTER", "MYID").Text()
		if err != nil {
			return fmt.Errorf("rediscluster: CLUSTER MYID of node %d: %w", i, err)
		}
		ids[i] = id
	}
	src, dst := c.probes[from], c.probes[to]
	setslot := func(cl *redis.Client, args ...any) error {
		return cl.Do(ctx, append([]any{"CLUSTER", "SETSLOT", slot}, args...)...).Err()
	}
	if err := setslot(dst, "IMPORTING", ids[from]); err != nil {
		return fmt.Errorf("rediscluster: move slot %d: IMPORTING on node %d: %w", slot, to, err)
	}
	if err := setslot(src, "MIGRATING", ids[to]); err != nil {
		return fmt.Errorf("rediscluster: move slot %d: MIGRATING on node %d: %w", slot, from, err)
	}
	host, port, _ := net.SplitHostPort(c.nodes[to].addr())
	for {
		keys, err := src.ClusterGetKeysInSlot(ctx, slot, batch).Result()
		if err != nil {
			return fmt.Errorf("rediscluster: move slot %d: GETKEYSINSLOT: %w", slot, err)
		}
		if len(keys) == 0 {
			break
		}
		args := []any{"MIGRATE", host, port, "", 0, 10000, "KEYS"}
		for _, k := range keys {
			args = append(args, k)
		}
		if err := src.Do(ctx, args...).Err(); err != nil {
			return fmt.Errorf("rediscluster: move slot %d: MIGRATE %d keys: %w", slot, len(keys), err)
		}
		if pace > 0 {
			select {
			case <-ctx.Done():
				return ctx.Err()
			case <-time.After(pace):
			}
		}
	}
	// The new owner first, then the old one (which then answers MOVED),
	// then the others; the epoch bump spreads it over the bus too.
	order := []int{to, from}
	for _, i := range live {
		if i != to && i != from {
			if r, err := c.role(ctx, i); err == nil && r.kind == "master" {
				order = append(order, i)
			}
		}
	}
	for _, i := range order {
		if err := setslot(c.probes[i], "NODE", ids[to]); err != nil {
			return fmt.Errorf("rediscluster: move slot %d: SETSLOT NODE on node %d: %w", slot, i, err)
		}
	}
	return poll(ctx, okTimeout, fmt.Sprintf("slot %d not served by node %d", slot, to), func(ctx context.Context) (bool, string) {
		for _, i := range live {
			spans, err := c.slots(ctx, i)
			if err != nil {
				return false, fmt.Sprintf("node %d: %v", i, err)
			}
			for _, s := range spans {
				if slot >= s.start && slot <= s.end && s.node != to {
					return false, fmt.Sprintf("node %d: slot %d served by node %d", i, slot, s.node)
				}
			}
			nodes, err := c.probes[i].ClusterNodes(ctx).Result()
			if err != nil {
				return false, fmt.Sprintf("node %d: %v", i, err)
			}
			if strings.Contains(nodes, "[") {
				return false, fmt.Sprintf("node %d: a slot still migrating or importing", i)
			}
		}
		return true, ""
	})
}
