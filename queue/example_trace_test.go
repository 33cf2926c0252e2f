package queue_test

import (
	"context"
	"fmt"
	"sort"

	"github.com/redis/go-redis/v9"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"

	"github.com/shepherd-go/shepherd/queue"
)

// Submit's span and the attempt's span are one trace, wherever the task
// runs; the handler's ctx carries the attempt's span.
func ExampleWithTracerProvider() {
	ctx := context.Background()
	rdb := redis.NewClient(&redis.Options{Addr: queue.RedisAddr()})
	defer rdb.Close()
	spans := tracetest.NewSpanRecorder() // in production: an exporter to your collector
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(spans))
	q, err := queue.Open(ctx, rdb, "example-traces", queue.WithTracerProvider(tp))
	if err != nil {
		panic(err)
	}
	defer q.Close(ctx)
	if _, err := q.Serve(func(ctx context.Context, t *queue.Task) ([]byte, error) {
		return nil, nil
	}); err != nil {
		panic(err)
	}
	f, err := q.Submit(ctx, []byte("x"))
	if err != nil {
		panic(err)
	}
	if _, err := f.Wait(ctx); err != nil {
		panic(err)
	}
	// The attempt's span ends once Redis recorded its outcome, just
	// after the future completes.
	if err := q.Close(ctx); err != nil {
		panic(err)
	}
	// The two spans end at about the same moment, in either order (the
	// attempt can finish before Submit's goroutine ends its span), so
	// they are listed producer first.
	ended := spans.Ended()
	sort.Slice(ended, func(i, j int) bool { return ended[i].SpanKind() < ended[j].SpanKind() })
	for _, s := range ended {
		fmt.Println(s.Name(), s.SpanKind(), s.SpanContext().TraceID() == ended[0].SpanContext().TraceID())
	}
	// Output:
	// send example-traces producer true
	// process example-traces consumer true
}

// A handler reports its progress; any process reads it.
func ExampleTask_Progress() {
	ctx := context.Background()
	rdb := redis.NewClient(&redis.Options{Addr: queue.RedisAddr()})
	defer rdb.Close()
	q, err := queue.Open(ctx, rdb, "example-progress")
	if err != nil {
		panic(err)
	}
	defer q.Close(ctx)
	halfway := make(chan struct{})
	finish := make(chan struct{})
	if _, err := q.Serve(func(ctx context.Context, t *queue.Task) ([]byte, error) {
		if err := t.Progress(ctx, 50, "5 of 10 pages"); err != nil {
			return nil, err
		}
		close(halfway)
		<-finish
		return nil, nil
	}); err != nil {
		panic(err)
	}
	f, err := q.Submit(ctx, nil)
	if err != nil {
		panic(err)
	}
	<-halfway
	p, err := f.Progress(ctx) // or, from any process: Inspect(ctx, f.ID()).Progress
	if err != nil {
		panic(err)
	}
	fmt.Printf("%.0f%% %s\n", p.Value, p.Message)
	close(finish)
	if _, err := f.Wait(ctx); err != nil {
		panic(err)
	}
	// Output: 50% 5 of 10 pages
}
