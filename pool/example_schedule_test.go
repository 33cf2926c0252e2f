package pool_test

import (
	"context"
	"fmt"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/shepherd-go/shepherd/pool"
)

// devices is a JobProducer: it plans one job per connected device. A real
// one reads its inventory (a database, a registry) in Plan.
type devices struct{ calls int }

func (*devices) Name() string { return "devices" }

func (d *devices) Plan(ctx context.Context) (*pool.JobPlan, error) {
	d.calls++ // one planner at a time: Plan is never called twice at once
	if d.calls == 1 {
		return &pool.JobPlan{Jobs: []pool.PlannedJob{
			{Key: "device-1", Payload: []byte("v1")},
			{Key: "device-2", Payload: []byte("v1")},
		}}, nil
	}
	// device-1 is gone and device-2 has a new configuration: the last plan.
	return &pool.JobPlan{Jobs: []pool.PlannedJob{{Key: "device-2", Payload: []byte("v2")}}, StopOthers: true},
		pool.ErrEndSchedule
}

// Schedule runs a pool from a desired state: every interval one node
// asks its producer for a plan, and the pool starts, stops and restarts
// jobs to match.
func ExampleNode_Schedule() {
	ctx := context.Background()
	rdb := redis.NewClient(&redis.Options{Addr: pool.RedisAddr()}) // for instance "localhost:6379"
	defer rdb.Close()

	node, err := pool.AddNode(ctx, rdb, "example-schedule")
	if err != nil {
		panic(err)
	}
	if _, err := node.AddWorker(ctx, printer{}); err != nil {
		panic(err)
	}
	// One step at a time, so that the output's order is fixed.
	if err := node.Schedule(ctx, &devices{}, 100*time.Millisecond, pool.WithPlanConcurrency(1)); err != nil {
		panic(err)
	}
	for {
		st, err := node.Stats(ctx)
		if err != nil {
			panic(err)
		}
		if len(st.Schedules) == 0 && st.Running == 1 {
			break // the producer ended its schedule
		}
		time.Sleep(10 * time.Millisecond)
	}
	fmt.Println("schedule ended")
	if err := node.Shutdown(ctx); err != nil {
		panic(err)
	}
	// Output:
	// start device-1 v1
	// start device-2 v1
	// stop device-1
	// stop device-2
	// start device-2 v2
	// schedule ended
	// stop device-2
}

// A cluster ticker ticks once per period across the pool, on one of the
// nodes that hold it.
func ExampleNode_NewTicker() {
	ctx := context.Background()
	rdb := redis.NewClient(&redis.Options{Addr: pool.RedisAddr()}) // for instance "localhost:6379"
	defer rdb.Close()

	node, err := pool.AddNode(ctx, rdb, "example-ticker", pool.WithClientOnly())
	if err != nil {
		panic(err)
	}
	defer node.Close(ctx)
	tk, err := node.NewTicker(ctx, "report", 50*time.Millisecond)
	if err != nil {
		panic(err)
	}
	for range 3 {
		<-tk.C // on one node of the pool only
		fmt.Println("send the report")
	}
	// Stop for every node; tk.Stop() would stop it on this node only.
	if err := node.StopTicker(ctx, "report"); err != nil {
		panic(err)
	}
	for range tk.C { // drained and closed
	}
	fmt.Println("stopped")
	// Output:
	// send the report
	// send the report
	// send the report
	// stopped
}
