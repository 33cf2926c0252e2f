package main

import (
	"context"
	"errors"
	"fmt"
	"math"
	"net"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/shepherd-go/shepherd/queue"
)

// twReplicaTimeout is the WAIT timeout of TW's queue.WithReplicas(1, ...).
const twReplicaTimeout = time.Second

// scenarioReplicas is TW: what queue.WithReplicas(1, 1s) costs. On a
// private primary with one replica it measures, in one run, T1's shape
// (2 processes × 4 workers, 64 submitters, 20,000 tasks) and T2's (2,000
// sequential Submit → Wait), each without replicated acknowledgement and
// with it: four lines, told apart by the label shape ("T1", "T2") and
// the metric replicas (0, 1). redis_cpu_us_per_task is the primary's CPU
// alone. The replicas=1 lines compare themselves with the replicas=0
// line of their shape: tasks_per_s_vs_none (T1, a ratio) and
// result_p50_ms_more (T2, the difference in ms).
//
// Both lines of a shape share the pair: without WithReplicas the primary
// still feeds its replica; only the WAITs differ.
func scenarioReplicas(ctx context.Context, b *bench, _ int) (result, error) {
	pair, err := startReplicaPair(ctx)
	if err != nil {
		return newResult(), fmt.Errorf("primary and replica: %w", err)
	}
	defer pair.stop()
	t := queueTarget{
		newClient: func() redis.UniversalClient {
			return redis.NewClient(&redis.Options{Addr: pair.primary.addr, PoolSize: 128})
		},
		info: pair.rdb,
	}
	var out []result
	for _, shape := range []string{"T1", "T2"} {
		for _, replicas := range []int{0, 1} {
			var opts []queue.Option
			if replicas > 0 {
				opts = append(opts, queue.WithReplicas(replicas, twReplicaTimeout))
			}
			name := fmt.Sprintf("tw-%s-r%d", strings.ToLower(shape), replicas)
			var r result
			var err error
			if shape == "T1" {
				r, err = b.queueThroughput(ctx, t, name, opts)
			} else {
				r, err = b.queueLatency(ctx, t, name, opts)
			}
			if err != nil {
				return newResult(), fmt.Errorf("%s replicas=%d: %w", shape, replicas, err)
			}
			r.Variant = fmt.Sprintf("%s replicas=%d", shape, replicas)
			r.label("shape", shape)
			r.set("replicas", float64(replicas))
			out = append(out, r)
		}
	}
	compareReplicas(out[0], out[1], out[2], out[3])
	first := out[0]
	first.more = out[1:]
	return first, nil
}

// compareReplicas records on the replicas=1 lines how they compare with
// the replicas=0 line of their shape.
func compareReplicas(t1None, t1With, t2None, t2With result) {
	if v := t1None.Metrics["tasks_per_s"]; v > 0 {
		t1With.set("tasks_per_s_vs_none", t1With.Metrics["tasks_per_s"]/v)
	}
	more := t2With.Metrics["result_p50_ms"] - t2None.Metrics["result_p50_ms"]
	t2With.set("result_p50_ms_more", math.Round(more*1000)/1000)
}

// replicaPair is TW's private primary and its replica, without
// persistence.
type replicaPair struct {
	primary, replica *privateRedis
	rdb              *redis.Client // on the primary: its INFO, and the wait for the replica
}

// disklessSync makes a replica's first sync start at once: the primary
// streams its data over the socket with no delay (Redis 7.0 waits 5s by
// default for more replicas to join). The primary is the side that
// decides; the replica gets the same arguments, as it would after a
// failover.
var disklessSync = []string{"--repl-diskless-sync", "yes", "--repl-diskless-sync-delay", "0"}

// startReplicaPair starts a primary and a replica of it on free loopback
// ports, and waits until the primary's WAIT 1 after a write answers 1.
func startReplicaPair(ctx context.Context) (*replicaPair, error) {
	primary, err := startRedis(ctx, disklessSync...)
	if err != nil {
		return nil, err
	}
	host, port, err := net.SplitHostPort(primary.addr)
	if err != nil {
		primary.stop()
		return nil, err
	}
	replica, err := startRedis(ctx, append([]string{"--replicaof", host, port}, disklessSync...)...)
	if err != nil {
		primary.stop()
		return nil, err
	}
	p := &replicaPair{primary: primary, replica: replica,
		rdb: redis.NewClient(&redis.Options{Addr: primary.addr, PoolSize: 4})}
	if err := p.waitReplicated(ctx, 30*time.Second); err != nil {
		p.stop()
		return nil, err
	}
	return p, nil
}

// waitReplicated writes a key on the primary and WAITs for 1 replica
// until one acknowledges it, for up to limit.
func (p *replicaPair) waitReplicated(ctx context.Context, limit time.Duration) error {
	const key = "shepherd-bench-tw-sync"
	deadline := time.Now().Add(limit)
	for {
		if err := p.rdb.Set(ctx, key, "1", 0).Err(); err != nil {
			return err
		}
		n, err := p.rdb.Wait(ctx, 1, 100*time.Millisecond).Result()
		if err != nil {
			return err
		}
		if n >= 1 {
			return p.rdb.Del(ctx, key).Err()
		}
		if time.Now().After(deadline) {
			return errors.New("the replica acknowledged no write after " + limit.String())
		}
		if err := ctx.Err(); err != nil {
			return err
		}
	}
}

func (p *replicaPair) stop() {
	_ = p.rdb.Close()
	p.replica.stop()
	p.primary.stop()
}
