package chaos

import (
	"context"
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/shepherd-go/shepherd/internal/keys"
	"github.com/shepherd-go/shepherd/internal/rediscluster"
	"github.com/shepherd-go/shepherd/internal/redistest"
	"github.com/shepherd-go/shepherd/pool"
)

// clusterTiming is the pool's timings on a Redis Cluster: a WorkerTTL
// (-chaos.clusterttl, 5 s) above a master's outage in a restart (2 to
// 2.7 s: an AOF restart, or a failover at clusterNodeTimeout), short
// enough that a killed or frozen process's jobs move in seconds. An
// outage still gets a live worker declared dead now and then (its
// keep-alive, every WorkerTTL/3, does not land within WorkerTTL): 1
// round in 28 in a soak at 5 s, 1 run in 20 at 3 s.
func clusterTiming() timing { return timing{ttl: *chaosClusterTTL, pending: pendingTTL} }

// clusterNodeTimeout is the cluster's cluster-node-timeout: a killed
// master's replica takes its place about this long after, and a second.
const clusterNodeTimeout = time.Second

// newPoolOnCluster starts a Redis Cluster of 3 masters, each with replicas
// replicas (none: every node with AOF, appendfsync always, so that a
// restarted master keeps what it acknowledged), a standalone Redis for the
// log (outside every fault), the dispatcher and n worker processes of a
// pool of shards shards. With replicas, the dispatcher asks for them
// (pool.WithReplicas), so that a failover undoes no acknowledged dispatch.
func newPoolOnCluster(t *testing.T, n, replicas, shards int) *cluster {
	t.Helper()
	opts := []redistest.ClusterOption{rediscluster.WithNodeTimeout(clusterNodeTimeout), rediscluster.WithAOF()}
	if replicas > 0 {
		opts = []redistest.ClusterOption{rediscluster.WithNodeTimeout(clusterNodeTimeout), rediscluster.WithReplicas(replicas)}
	}
	c := &cluster{t: t, rc: redistest.StartCluster(t, 3, opts...), logSrv: redistest.Start(t), shards: shards,
		timing: clusterTiming()}
	c.pool = c.spreadName()
	if replicas > 0 {
		c.dispOpts = []pool.NodeOption{pool.WithReplicas(replicas, time.Second)}
	}
	return c.start(n)
}

// spreadName returns a pool name of the test's whose shards land on as
// many masters as can be (all 3 when it has 3 shards or more).
func (c *cluster) spreadName() string {
	t := c.t
	ctx := ctxFor(t, 20*time.Second)
	base := redistest.Name(t)
	for i := range 1000 {
		c.pool = fmt.Sprintf("%s-%d", base, i)
		seen := map[int]bool{}
		for s := range c.shards {
			node, err := c.rc.NodeOf(ctx, c.shardKey(s))
			require.NoError(t, err)
			seen[node] = true
		}
		if len(seen) == min(c.shards, 3) {
			return c.pool
		}
	}
	t.Fatalf("no pool name of 1000 puts %d shards on %d masters", c.shards, min(c.shards, 3))
	return ""
}

// shardKey is a key of the pool's shard i (its settings): NodeOf and
// CLUSTER KEYSLOT of it name the shard's master and slot.
func (c *cluster) shardKey(i int) string {
	return "shepherd:{" + keys.ShardTag(c.pool, i) + "}:pool:settings"
}

// restartMaster restarts the master that serves shard i: without replicas
// it is killed and started again on its AOF; with replicas it is killed, a
// replica takes its place, and it comes back as a replica. It logs the
// fault and returns what it did.
func (c *cluster) restartMaster(ctx context.Context, i int) string {
	t := c.t
	node, err := c.rc.NodeOf(ctx, c.shardKey(i))
	require.NoError(t, err)
	c.note(EvFault, "", fmt.Sprintf("restart of node %d", node))
	began := time.Now()
	require.NoError(t, c.rc.Kill(node))
	if c.rc.Replicas() > 0 {
		require.NoError(t, c.rc.WaitFailover(ctx, node))
	}
	failedOver := time.Since(began)
	require.NoError(t, c.rc.Restart(ctx, node))
	now, err := c.rc.NodeOf(ctx, c.shardKey(i))
	require.NoError(t, err)
	c.note(EvFault, "", fmt.Sprintf("node %d back", node))
	return fmt.Sprintf("shard %d's master (node %d) restarted: shard served again by node %d after %v, node %d back after %v",
		i, node, now, failedOver.Round(time.Millisecond), node, time.Since(began).Round(time.Millisecond))
}

// freezeHeld SIGSTOPs victim and returns the jobs it ran then.
func (c *cluster) freezeHeld(victim string) map[string]bool {
	held := map[string]bool{}
	for k, hs := range c.report().Running {
		for _, h := range hs {
			if strings.HasPrefix(h, victim+"/") {
				held[k] = true
			}
		}
	}
	c.freeze(victim)
	return held
}

// thawOnceMoved SIGCONTs victim, frozen since began for longer than
// WorkerTTL, once every job of held that it still runs runs elsewhere too
// (or was stopped), and says how long it was frozen.
func (c *cluster) thawOnceMoved(victim string, held map[string]bool, began time.Time) string {
	time.Sleep(time.Until(began.Add(c.timing.ttl)))
	require.Eventually(c.t, func() bool {
		r := c.report()
		for k := range held {
			// A job the victim stopped before the freeze took (a StopJob,
			// a move) is not its to hold.
			hs := r.Running[k]
			mine := slices.ContainsFunc(hs, func(h string) bool { return strings.HasPrefix(h, victim+"/") })
			if mine && len(hs) < 2 && !slices.Contains(r.Zombies, k) {
				return false
			}
		}
		return true
	}, 20*time.Second, 50*time.Millisecond, "the jobs of frozen %s did not start elsewhere", victim)
	took := time.Since(began)
	c.thaw(victim)
	return fmt.Sprintf("froze %s (%d jobs) for %v", victim, len(held), took.Round(time.Millisecond))
}

// moveShard moves shard i's slot, with its keys, to the next master.
func (c *cluster) moveShard(ctx context.Context, i int) string {
	t := c.t
	from, err := c.rc.NodeOf(ctx, c.shardKey(i))
	require.NoError(t, err)
	masters, err := c.rc.MasterNodes(ctx)
	require.NoError(t, err)
	to := masters[(slices.Index(masters, from)+1)%len(masters)]
	slot, err := c.rc.Node(to).ClusterKeySlot(ctx, c.shardKey(i)).Result()
	require.NoError(t, err)
	c.note(EvFault, "", fmt.Sprintf("move of slot %d", slot))
	began := time.Now()
	require.NoError(t, c.rc.MoveSlot(ctx, int(slot), to, 2, 2*time.Millisecond))
	c.note(EvFault, "", fmt.Sprintf("slot %d moved", slot))
	return fmt.Sprintf("shard %d (slot %d) moved from node %d to node %d in %v", i, slot, from, to,
		time.Since(began).Round(time.Millisecond))
}

// TestChaosPoolOnCluster runs the pool on a Redis Cluster of 3 masters
// under steady churn, while rounds of faults hit it: a worker process
// SIGKILLed (and replaced), one SIGSTOPped for longer than WorkerTTL, the
// master of a shard's slot killed and restarted, another shard's slot
// moved to another master. Four variants, two at a time (each starts a
// cluster and four processes; all at once they crowd the other scenarios
// off the machine's 2 cores: TestChaosQueue's recovery bound failed once):
//
//   - shards1: one shard, masters without replicas, AOF on every node
//     (appendfsync always): the restarted master keeps what it
//     acknowledged;
//   - shards1-replicas: a replica per master: the restart is a failover
//     (the replica promoted, the old master back as its replica), and the
//     dispatcher asks for replicated acknowledgement;
//   - shards3, shards3-replicas: the same with a pool of 3 shards, one on
//     each master: each round restarts one shard's master and moves
//     another shard's slot.
func TestChaosPoolOnCluster(t *testing.T) {
	t.Parallel()
	two := make(chan struct{}, 2)
	for _, v := range []struct {
		name             string
		replicas, shards int
	}{{"shards1", 0, 1}, {"shards1-replicas", 1, 1}, {"shards3", 0, 3}, {"shards3-replicas", 1, 3}} {
		t.Run(v.name, func(t *testing.T) {
			t.Parallel()
			two <- struct{}{}
			defer func() { <-two }()
			chaosPoolOnCluster(t, v.replicas, v.shards)
		})
	}
}

// chaosPoolOnCluster is the cluster scenario: 3 worker processes, churn
// (dispatches and stops), and rounds of the four faults until the phase
// ends (one round in CI), each shard's master and slot in turn; then the
// checks: at rest every acknowledged key runs on exactly one worker and
// none is lost, the pool's records agree with the handlers, every job of
// a killed or frozen process started elsewhere, and no key ran on two
// live workers at once away from Redis's faults (a frozen process's stale
// copy, until it stops it after SIGCONT, is not live), nor for longer
// than a keep-alive period and a second after one.
func chaosPoolOnCluster(t *testing.T, replicas, shards int) {
	c := newPoolOnCluster(t, 3, replicas, shards)
	c.maxLive = 300 // about 100 a process, as a kill's restarts stay short
	c.dispatchN("before", 60)
	c.settle(10 * time.Second)

	phase := faultPhase(time.Second) // one round in CI
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	done := make(chan [2]int, 1)
	go func() {
		ok, failed := c.churn(ctx, "churn", 2, 10)
		done <- [2]int{ok, failed}
	}()
	fctx := ctxFor(t, 5*time.Minute)
	end := time.Now().Add(phase)
	rounds := 0
	for ; time.Now().Before(end) || rounds == 0; rounds++ {
		time.Sleep(500 * time.Millisecond) // let work flow between faults
		// A kill and a freeze at once: both wait out WorkerTTL.
		live := c.live()
		i := rand.IntN(len(live))
		killed, frozen := live[i], live[(i+1)%len(live)]
		c.kill(killed)
		began := time.Now()
		held := c.freezeHeld(frozen)
		c.spawn()
		t.Log("killed " + killed)
		t.Log(c.thawOnceMoved(frozen, held, began))

		time.Sleep(500 * time.Millisecond)
		t.Log(c.restartMaster(fctx, rounds%c.shards))

		time.Sleep(500 * time.Millisecond)
		t.Log(c.moveShard(fctx, (rounds+1)%c.shards))
	}
	cancel()
	res := <-done
	r := c.settle(3*c.timing.ttl + 15*time.Second)
	t.Logf("%d rounds; DispatchJob ok %d, failed %d\n%s", rounds, res[0], res[1], r.Summary())
	require.Equal(t, rounds, r.Kills)
	require.Equal(t, rounds, r.Freezes)
	assert.Empty(t, r.Unrecovered, "jobs of a killed process never started again")
	assert.Empty(t, r.UnmovedAtThaw, "jobs of a frozen process did not start elsewhere while it was frozen")
	entries, err := c.log.Read(fctx)
	require.NoError(t, err)
	live := liveOverlaps(entries, r, c.timing.ttl+time.Second)
	// A Redis outage can get a live worker declared dead (its keep-alive,
	// every WorkerTTL/3, does not land within WorkerTTL): its jobs start
	// elsewhere before it learns, at its next keep-alive, and stops them.
	// That double running is bounded; outside Redis's faults there is none.
	keepAlive := c.timing.ttl / 3
	outside, during := splitByFaults(entries, live, c.timing.ttl+time.Second)
	assert.Empty(t, outside, "a key ran on two live workers at once, away from Redis's faults")
	var longest time.Duration
	for _, o := range during {
		longest = max(longest, o.Duration(r.End))
	}
	if len(during) > 0 {
		t.Logf("after a fault of Redis, %d keys ran on two live workers at once, the longest for %v", len(during), longest)
	}
	assert.LessOrEqual(t, longest, keepAlive+time.Second,
		"after a fault of Redis, a key ran on two live workers for longer than a keep-alive period and a second")
	c.finish(true)
}

// splitByFaults splits overlaps into those that began away from Redis's
// faults and those that began during one (from its first EvFault to
// after past its second: "restart of node N" … "node N back", "move of
// slot S" … "slot S moved").
func splitByFaults(entries []Entry, overlaps []Overlap, after time.Duration) (outside, during []Overlap) {
	type span struct{ from, to time.Time }
	var faults []span
	for _, e := range entries {
		if e.Event != EvFault {
			continue
		}
		if strings.HasPrefix(e.Key, "restart of") || strings.HasPrefix(e.Key, "move of") {
			faults = append(faults, span{from: e.Time()})
		} else if n := len(faults); n > 0 {
			faults[n-1].to = e.Time().Add(after)
		}
	}
	for _, o := range overlaps {
		in := slices.ContainsFunc(faults, func(f span) bool {
			return !o.From.Before(f.from) && (f.to.IsZero() || !o.From.After(f.to))
		})
		if in {
			during = append(during, o)
		} else {
			outside = append(outside, o)
		}
	}
	return outside, during
}

// liveOverlaps returns the overlaps of r that a freeze does not explain:
// those in which two workers of one process, or two processes that were
// not frozen, ran the key at once. A process counts as frozen from its
// SIGSTOP until grace after its SIGCONT (the time a thawed process takes
// to stop its stale copies).
func liveOverlaps(entries []Entry, r *Report, grace time.Duration) []Overlap {
	type span struct{ from, to time.Time }
	frozen := map[string][]span{}
	for _, e := range entries {
		switch e.Event {
		case EvFreeze:
			frozen[e.Proc] = append(frozen[e.Proc], span{from: e.Time()})
		case EvThaw:
			if s := frozen[e.Proc]; len(s) > 0 {
				s[len(s)-1].to = e.Time().Add(grace)
			}
		}
	}
	excused := func(proc string, o Overlap) bool {
		for _, s := range frozen[proc] {
			if !o.From.Before(s.from) && (s.to.IsZero() || !o.From.After(s.to)) {
				return true
			}
		}
		return false
	}
	var out []Overlap
	for _, o := range r.Overlaps {
		live := 0
		for _, p := range o.Procs {
			if !excused(p, o) {
				live++
			}
		}
		if live > 1 || o.Holders > len(o.Procs) { // two live processes, or two workers of one
			out = append(out, o)
		}
	}
	return out
}

// An overlap that begins during a fault of Redis, or within after of its
// end, is told apart from one that does not.
func TestSplitByFaults(t *testing.T) {
	t.Parallel()
	at := func(ms int64) time.Time { return time.UnixMilli(ms) }
	entries := []Entry{
		{Event: EvFault, Key: "restart of node 1", Ms: 1000},
		{Event: EvFault, Key: "node 1 back", Ms: 3000},
		{Event: EvFault, Key: "move of slot 7", Ms: 9000},
		{Event: EvFault, Key: "slot 7 moved", Ms: 9100},
	}
	overlaps := []Overlap{{Key: "before", From: at(900)}, {Key: "restart", From: at(2000)},
		{Key: "after", From: at(3900)}, {Key: "late", From: at(4100)}, {Key: "move", From: at(9500)}}
	outside, during := splitByFaults(entries, overlaps, time.Second)
	keys := func(os []Overlap) (out []string) {
		for _, o := range os {
			out = append(out, o.Key)
		}
		return out
	}
	assert.Equal(t, []string{"before", "late"}, keys(outside))
	assert.Equal(t, []string{"restart", "after", "move"}, keys(during))
}
