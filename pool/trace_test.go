package pool

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/otel/attribute"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"

	"github.com/shepherd-go/shepherd/internal/redistest"
)

// spanStarts is a JobHandler that keeps the span each Start ran in.
type spanStarts struct {
	mu    sync.Mutex
	spans []trace.SpanContext
}

func (s *spanStarts) Start(ctx context.Context, job *Job) error {
	s.mu.Lock()
	s.spans = append(s.spans, trace.SpanContextFromContext(ctx))
	s.mu.Unlock()
	return nil
}

func (s *spanStarts) Stop(context.Context, string) error { return nil }

func spanAttr(s sdktrace.ReadOnlySpan, k attribute.Key) attribute.Value {
	for _, a := range s.Attributes() {
		if a.Key == k {
			return a.Value
		}
	}
	return attribute.Value{}
}

// A job carries its DispatchJob's trace context to every node that starts
// it: the first Start, and the Start after it moved, each run in a
// consumer span that is a child of the dispatch span. Three nodes, each
// with its own tracer provider, share only Redis.
func TestTracesFollowTheJobAcrossNodes(t *testing.T) {
	t.Parallel()
	pool := redistest.Name(t)
	recA, recB, recC := tracetest.NewSpanRecorder(), tracetest.NewSpanRecorder(), tracetest.NewSpanRecorder()
	tpA := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(recA))
	tpB := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(recB))
	tpC := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(recC))
	a := addNode(t, srv.Client(), pool, WithTracerProvider(tpA))
	b := addNode(t, srv.Client(), pool, WithTracerProvider(tpB))
	hb := &spanStarts{}
	addWorkers(t, b, hb, 1)
	ctx := testCtx(t, 30*time.Second)

	pctx, parent := tpA.Tracer("test").Start(ctx, "request")
	require.NoError(t, a.DispatchJob(pctx, "job-1", []byte("x")))
	parent.End()
	require.Len(t, recA.Ended(), 2)
	dispatch := recA.Ended()[0]
	assert.Equal(t, "dispatch "+pool, dispatch.Name())
	assert.Equal(t, trace.SpanKindProducer, dispatch.SpanKind())
	assert.Equal(t, parent.SpanContext().SpanID(), dispatch.Parent().SpanID())

	require.Eventually(t, func() bool { return len(recB.Ended()) == 1 }, 5*time.Second, time.Millisecond)
	first := recB.Ended()[0]
	assert.Equal(t, "start "+pool, first.Name())
	assert.Equal(t, trace.SpanKindConsumer, first.SpanKind())
	assert.Equal(t, dispatch.SpanContext().TraceID(), first.SpanContext().TraceID())
	assert.Equal(t, dispatch.SpanContext().SpanID(), first.Parent().SpanID())
	assert.Equal(t, "job-1", spanAttr(first, AttrJobKey).AsString())
	assert.EqualValues(t, 1, spanAttr(first, AttrAttempt).AsInt64())
	hb.mu.Lock()
	assert.Equal(t, first.SpanContext().SpanID(), hb.spans[0].SpanID(), "Start's ctx carries its span")
	hb.mu.Unlock()

	// The job moves to node C when B leaves: its Start there joins the
	// same trace.
	c := addNode(t, srv.Client(), pool, WithTracerProvider(tpC))
	addWorkers(t, c, &spanStarts{}, 1)
	require.NoError(t, b.Close(ctx))
	require.Eventually(t, func() bool { return len(recC.Ended()) == 1 }, 15*time.Second, 5*time.Millisecond)
	moved := recC.Ended()[0]
	assert.Equal(t, dispatch.SpanContext().TraceID(), moved.SpanContext().TraceID())
	assert.Equal(t, dispatch.SpanContext().SpanID(), moved.Parent().SpanID())
	assert.EqualValues(t, 2, spanAttr(moved, AttrAttempt).AsInt64())

	_, err := AddNode(ctx, srv.Client(), pool, WithTracerProvider(nil))
	assert.ErrorIs(t, err, ErrInvalidOption)
}
