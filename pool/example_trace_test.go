package pool_test

import (
	"context"
	"fmt"

	"github.com/redis/go-redis/v9"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"

	"github.com/shepherd-go/shepherd/pool"
)

// DispatchJob's span and its Start's span are one trace, on whatever
// node the job starts; Start's ctx carries its span.
func ExampleWithTracerProvider() {
	ctx := context.Background()
	rdb := redis.NewClient(&redis.Options{Addr: pool.RedisAddr()})
	defer rdb.Close()
	spans := tracetest.NewSpanRecorder() // in production: an exporter to your collector
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(spans))
	node, err := pool.AddNode(ctx, rdb, "example-traces", pool.WithTracerProvider(tp))
	if err != nil {
		panic(err)
	}
	defer node.Shutdown(ctx)
	if _, err := node.AddWorker(ctx, printer{}); err != nil {
		panic(err)
	}
	if err := node.DispatchJob(ctx, "tenant-42", []byte("hello")); err != nil {
		panic(err)
	}
	for _, s := range spans.Ended() {
		fmt.Println(s.Name(), s.SpanKind(), s.SpanContext().TraceID() == spans.Ended()[0].SpanContext().TraceID())
	}
	// Output:
	// start tenant-42 hello
	// start example-traces consumer true
	// dispatch example-traces producer true
	// stop tenant-42
}
