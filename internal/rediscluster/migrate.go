package rediscluster

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/shepherd-go/shepherd/internal/slotmove"
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
	i, err := c.startNode(ctx, c.nodes[0].path)
	if err != nil {
		return -1, err
	}
	n := c.nodes[i]
	c.spare = append(c.spare, i)
	via := -1
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
// or one AddMaster added), as `redis-cli --cluster reshard` moves a slot
// (internal/slotmove: batch keys a MIGRATE, pausing pace between two, to
// hold the slot open longer in a test; 0 for none), and waits until every
// live node agrees that to serves the slot. Clients learn it from the
// MOVED replies of the old master. Moving a slot to the master that
// serves it is a no-op.
func (c *Cluster) MoveSlot(ctx context.Context, slot, to, batch int, pace time.Duration) error {
	if slot < 0 || slot >= Slots {
		return fmt.Errorf("rediscluster: slot %d: want 0 to %d", slot, Slots-1)
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
	var others []*redis.Client
	for _, i := range live {
		if i != to && i != from {
			if r, err := c.role(ctx, i); err == nil && r.kind == "master" {
				others = append(others, c.probes[i])
			}
		}
	}
	mv := slotmove.Move{Slot: slot, From: c.probes[from], To: c.probes[to], ToAddr: c.nodes[to].addr(),
		Others: others, Batch: batch, Pace: pace}
	if _, err := mv.Run(ctx); err != nil {
		return fmt.Errorf("rediscluster: move slot %d from node %d to node %d: %w", slot, from, to, err)
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
