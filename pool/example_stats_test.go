package pool_test

import (
	"context"
	"fmt"

	"github.com/redis/go-redis/v9"
	"github.com/shepherd-go/shepherd/pool"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"
)

func ExampleNode_Stats() {
	ctx := context.Background()
	rdb := redis.NewClient(&redis.Options{Addr: pool.RedisAddr()})
	defer rdb.Close()
	node, err := pool.AddNode(ctx, rdb, "example-stats")
	if err != nil {
		panic(err)
	}
	defer node.Shutdown(ctx)
	for i := 0; i < 3; i++ {
		if _, err := node.AddWorker(ctx, quiet{}); err != nil {
			panic(err)
		}
	}
	for _, key := range []string{"a", "b"} {
		if err := node.DispatchJob(ctx, key, nil); err != nil {
			panic(err)
		}
	}
	st, err := node.Stats(ctx)
	if err != nil {
		panic(err)
	}
	fmt.Println("nodes", len(st.Nodes), "workers", len(st.Workers), "busy+idle", st.WorkersBusy+st.WorkersIdle)
	fmt.Println("jobs", st.Jobs, "running", st.Running, "queued", st.QueueDepth, "pending", st.Pending, "orphans", len(st.Orphans))
	// Output:
	// nodes 1 workers 3 busy+idle 3
	// jobs 2 running 2 queued 0 pending 0 orphans 0
}

func ExampleWithMeterProvider() {
	ctx := context.Background()
	rdb := redis.NewClient(&redis.Options{Addr: pool.RedisAddr()})
	defer rdb.Close()
	// In a service: a MeterProvider with a Prometheus or OTLP exporter.
	reader := sdkmetric.NewManualReader()
	mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(reader))
	defer mp.Shutdown(ctx)

	node, err := pool.AddNode(ctx, rdb, "example-metrics", pool.WithMeterProvider(mp))
	if err != nil {
		panic(err)
	}
	defer node.Shutdown(ctx)
	if _, err := node.AddWorker(ctx, quiet{}); err != nil {
		panic(err)
	}
	for _, key := range []string{"a", "b", "c"} {
		if err := node.DispatchJob(ctx, key, nil); err != nil {
			panic(err)
		}
	}
	var rm metricdata.ResourceMetrics
	if err := reader.Collect(ctx, &rm); err != nil {
		panic(err)
	}
	for _, m := range rm.ScopeMetrics[0].Metrics {
		if sum, ok := m.Data.(metricdata.Sum[int64]); ok && m.Name == pool.MetricJobsDispatched {
			fmt.Println(m.Name, sum.DataPoints[0].Value)
		}
	}
	// Output:
	// shepherd.pool.jobs.dispatched 3
}
