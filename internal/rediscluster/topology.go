package rediscluster

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"
)

// failoverTimeout bounds WaitFailover: the node timeout (2 s) before the
// others mark the node failed, a replica's election delay (0.5 to 1 s
// for the first in rank) and its election, with room for a loaded
// machine.
const failoverTimeout = 30 * time.Second

// pollEvery is how often the waits ask the nodes again.
const pollEvery = 20 * time.Millisecond

// span is a range of slots and the index of the node that serves it.
type span struct{ start, end, node int }

// live returns the indexes of the nodes whose process runs. The caller
// holds c.mu (or is Start, before c is shared).
func (c *Cluster) live() []int {
	var out []int
	for i, n := range c.nodes {
		if n.running() {
			out = append(out, i)
		}
	}
	return out
}

// liveNodes is live under c.mu, for the methods that only read.
func (c *Cluster) liveNodes() ([]int, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closed {
		return nil, fmt.Errorf("rediscluster: cluster closed")
	}
	return c.live(), nil
}

// index returns the index of the node at addr, or -1.
func (c *Cluster) index(addr string) int {
	for i, n := range c.nodes {
		if n.addr() == addr {
			return i
		}
	}
	return -1
}

// slots returns who serves which slots, as node i sees it (CLUSTER SLOTS:
// a range's first node is its master).
func (c *Cluster) slots(ctx context.Context, i int) ([]span, error) {
	ranges, err := c.probes[i].ClusterSlots(ctx).Result()
	if err != nil {
		return nil, err
	}
	out := make([]span, 0, len(ranges))
	for _, r := range ranges {
		if len(r.Nodes) == 0 {
			return nil, fmt.Errorf("slots %d-%d: no node", r.Start, r.End)
		}
		n := c.index(r.Nodes[0].Addr)
		if n < 0 {
			return nil, fmt.Errorf("slots %d-%d served by %s, which is not one of ours", r.Start, r.End, r.Nodes[0].Addr)
		}
		out = append(out, span{r.Start, r.End, n})
	}
	slices.SortFunc(out, func(a, b span) int { return a.start - b.start })
	return out, nil
}

// covers reports whether spans serve every slot once.
func covers(spans []span) bool {
	next := 0
	for _, s := range spans {
		if s.start != next {
			return false
		}
		next = s.end + 1
	}
	return next == Slots
}

// owners returns the indexes of the nodes that serve some slot, sorted.
func owners(spans []span) []int {
	var out []int
	for _, s := range spans {
		if !slices.Contains(out, s.node) {
			out = append(out, s.node)
		}
	}
	slices.Sort(out)
	return out
}

// role is what ROLE says of a node: "master", or "slave" with its
// master's address and the state of its link ("connected" once synced).
type role struct {
	kind, master, state string
}

func (c *Cluster) role(ctx context.Context, i int) (role, error) {
	v, err := c.probes[i].Do(ctx, "ROLE").Slice()
	if err != nil {
		return role{}, err
	}
	r := role{kind: fmt.Sprint(v[0])}
	if r.kind == "slave" {
		if len(v) < 4 {
			return role{}, fmt.Errorf("ROLE: %v", v)
		}
		r.master = fmt.Sprintf("%v:%v", v[1], v[2])
		r.state = fmt.Sprint(v[3])
	}
	return r, nil
}

// roles returns each node's role as node i sees it (CLUSTER NODES), by
// node index: "master", or the index of the master it replicates; the
// nodes in skip are left out.
func (c *Cluster) roles(ctx context.Context, i int, skip func(int) bool) (map[int]string, error) {
	text, err := c.probes[i].ClusterNodes(ctx).Result()
	if err != nil {
		return nil, err
	}
	type entry struct{ addr, flags, master string }
	byID := map[string]entry{}
	for _, line := range strings.Split(strings.TrimSpace(text), "\n") {
		f := strings.Fields(line)
		if len(f) < 4 {
			return nil, fmt.Errorf("CLUSTER NODES line %q", line)
		}
		addr, _, _ := strings.Cut(f[1], "@")
		byID[f[0]] = entry{addr, f[2], f[3]}
	}
	out := map[int]string{}
	for _, e := range byID {
		n := c.index(e.addr)
		if n < 0 {
			return nil, fmt.Errorf("node %s is not one of ours", e.addr)
		}
		if skip(n) {
			continue
		}
		switch flags := strings.Split(e.flags, ","); {
		case slices.Contains(flags, "master"):
			out[n] = "master"
		case slices.Contains(flags, "slave"):
			out[n] = fmt.Sprint(c.index(byID[e.master].addr))
		default:
			out[n] = e.flags
		}
	}
	return out, nil
}

// poll calls check every pollEvery until it reports done, ctx ends or
// timeout passes; the error then carries check's last word.
func poll(ctx context.Context, timeout time.Duration, what string, check func(context.Context) (done bool, last string)) error {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	for {
		done, last := check(ctx)
		if done {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("rediscluster: %s: %w; last: %s", what, ctx.Err(), last)
		case <-time.After(pollEvery): // polling the nodes' gossip
		}
	}
}

// waitOK polls the live nodes until each reports cluster_state:ok, all
// slots assigned and served, and knows every node (replicas and dead
// ones too); they agree on who serves which slots; every master serves
// slots, and on which live node is a master and which replicates which
// (a master votes for a replica's promotion only once it knows it is
// one); and every replica's link to its master is up (ROLE: connected),
// so that it has its master's data and WAIT can count it. The caller
// holds c.mu, or is Start.
func (c *Cluster) waitOK(ctx context.Context) error {
	live := c.live()
	dead := func(n int) bool { return !slices.Contains(live, n) }
	want := []string{
		"cluster_state:ok",
		fmt.Sprintf("cluster_slots_assigned:%d", Slots),
		fmt.Sprintf("cluster_slots_ok:%d", Slots),
		fmt.Sprintf("cluster_known_nodes:%d", len(c.nodes)),
	}
	return poll(ctx, okTimeout, "cluster not ok", func(ctx context.Context) (bool, string) {
		var first []span
		var firstRoles map[int]string
		for _, i := range live {
			info, err := c.probes[i].ClusterInfo(ctx).Result()
			if err != nil {
				return false, fmt.Sprintf("node %d: %v", i, err)
			}
			if !hasAll(info, want) {
				return false, fmt.Sprintf("node %d: %s", i, strings.Join(strings.Fields(info), " "))
			}
			roles, err := c.roles(ctx, i, dead)
			if err != nil {
				return false, fmt.Sprintf("node %d: %v", i, err)
			}
			if firstRoles == nil {
				firstRoles = roles
			} else if !maps.Equal(firstRoles, roles) {
				return false, fmt.Sprintf("nodes %d and %d disagree on the roles: %v, %v", live[0], i, firstRoles, roles)
			}
			spans, err := c.slots(ctx, i)
			if err != nil {
				return false, fmt.Sprintf("node %d: %v", i, err)
			}
			if first == nil {
				first = spans
			} else if !slices.Equal(first, spans) {
				return false, fmt.Sprintf("nodes %d and %d disagree on the slots", live[0], i)
			}
			r, err := c.role(ctx, i)
			if err != nil {
				return false, fmt.Sprintf("node %d: %v", i, err)
			}
			switch {
			case r.kind == "master" && !slices.Contains(owners(spans), i) && !slices.Contains(c.spare, i):
				// A failed-over master that restarts claims its old
				// slots until the others tell it it lost them.
				return false, fmt.Sprintf("node %d: a master with no slots", i)
			case r.kind == "slave" && r.state != "connected":
				return false, fmt.Sprintf("node %d: replica of %s, link %s", i, r.master, r.state)
			}
		}
		return true, ""
	})
}

func hasAll(info string, lines []string) bool {
	fields := strings.Fields(info)
	for _, l := range lines {
		if !slices.Contains(fields, l) {
			return false
		}
	}
	return true
}

// WaitFailover waits until the slots node i served are served by other
// nodes: every live node but i reports cluster_state:ok with all 16384
// slots served (cluster_slots_ok), and they agree on who serves which
// slots, none of them node i. Call it after Kill(i) of a master with
// replicas: one of them is promoted after the node timeout, in about
// three seconds with the default one. For a node that served no slots it
// waits for cluster_state:ok alone. It gives up after 30 s, or when ctx
// ends.
//
// Clients keep their own view of the slots until they reload it: a
// go-redis ClusterClient reloads on a MOVED reply and on its
// ClusterStateReloadInterval, not when a node refuses connections.
func (c *Cluster) WaitFailover(ctx context.Context, i int) error {
	live, err := c.liveNodes()
	if err != nil {
		return err
	}
	live = slices.DeleteFunc(live, func(j int) bool { return j == i })
	want := []string{"cluster_state:ok", fmt.Sprintf("cluster_slots_ok:%d", Slots)}
	return poll(ctx, failoverTimeout, fmt.Sprintf("no failover of node %d", i), func(ctx context.Context) (bool, string) {
		var first []span
		for _, j := range live {
			info, err := c.probes[j].ClusterInfo(ctx).Result()
			if err != nil {
				return false, fmt.Sprintf("node %d: %v", j, err)
			}
			if !hasAll(info, want) {
				return false, fmt.Sprintf("node %d: %s", j, strings.Join(strings.Fields(info), " "))
			}
			spans, err := c.slots(ctx, j)
			if err != nil {
				return false, fmt.Sprintf("node %d: %v", j, err)
			}
			if !covers(spans) || slices.Contains(owners(spans), i) {
				return false, fmt.Sprintf("node %d: slots served by %v", j, owners(spans))
			}
			if first == nil {
				first = spans
			} else if !slices.Equal(first, spans) {
				return false, fmt.Sprintf("nodes %d and %d disagree on the slots", live[0], j)
			}
		}
		return true, ""
	})
}

// MasterNodes returns the indexes of the nodes that serve slots now,
// sorted, as the first live node that answers sees them (after a
// failover, call WaitFailover first: until then the nodes may disagree).
// With no replicas they are 0 to Masters()-1; with replicas, which nodes
// redis-cli made masters is its choice, and failovers change them.
func (c *Cluster) MasterNodes(ctx context.Context) ([]int, error) {
	spans, err := c.anyLive(ctx, c.slots)
	if err != nil {
		return nil, fmt.Errorf("rediscluster: masters: %w", err)
	}
	return owners(spans), nil
}

// ReplicasOf returns the indexes of the live nodes that replicate node i
// now, sorted, each as it says itself (ROLE), whether or not its link to
// node i is up.
func (c *Cluster) ReplicasOf(ctx context.Context, i int) ([]int, error) {
	live, err := c.liveNodes()
	if err != nil {
		return nil, err
	}
	var out []int
	for _, j := range live {
		if j == i {
			continue
		}
		r, err := c.role(ctx, j)
		if err != nil {
			return nil, fmt.Errorf("rediscluster: role of node %d: %w", j, err)
		}
		if r.kind == "slave" && r.master == c.nodes[i].addr() {
			out = append(out, j)
		}
	}
	return out, nil
}

// NodeOf returns the index of the node that serves key's slot, as the
// first live node that answers sees it (CLUSTER KEYSLOT and CLUSTER
// SLOTS), so that it is right after a failover once WaitFailover has
// returned, whatever the clients' views.
func (c *Cluster) NodeOf(ctx context.Context, key string) (int, error) {
	var slot int64
	spans, err := c.anyLive(ctx, func(ctx context.Context, i int) ([]span, error) {
		var err error
		if slot, err = c.probes[i].ClusterKeySlot(ctx, key).Result(); err != nil {
			return nil, err
		}
		return c.slots(ctx, i)
	})
	if err != nil {
		return -1, fmt.Errorf("rediscluster: node of %q: %w", key, err)
	}
	for _, s := range spans {
		if int(slot) >= s.start && int(slot) <= s.end {
			return s.node, nil
		}
	}
	return -1, fmt.Errorf("rediscluster: node of %q: nobody serves slot %d", key, slot)
}

// anyLive returns read's answer from the first live node that gives one.
func (c *Cluster) anyLive(ctx context.Context, read func(context.Context, int) ([]span, error)) ([]span, error) {
	live, err := c.liveNodes()
	if err != nil {
		return nil, err
	}
	var errs []string
	for _, i := range live {
		spans, err := read(ctx, i)
		if err == nil {
			return spans, nil
		}
		errs = append(errs, fmt.Sprintf("node %d: %v", i, err))
	}
	return nil, fmt.Errorf("no live node answered (%s)", strings.Join(errs, "; "))
}
