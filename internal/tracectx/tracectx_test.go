package tracectx

import (
	"context"
	"errors"
	"testing"

	"github.com/stretchr/testify/assert"
	"go.opentelemetry.io/otel/codes"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"
)

func TestInjectAndWithRemoteParentRoundTrip(t *testing.T) {
	t.Parallel()
	tp := sdktrace.NewTracerProvider()
	ctx, span := tp.Tracer("test").Start(context.Background(), "call")
	defer span.End()
	ts, err := trace.ParseTraceState("vendor=x")
	assert.NoError(t, err)
	ctx = trace.ContextWithSpanContext(ctx, span.SpanContext().WithTraceState(ts))
	s := Inject(ctx)
	assert.Contains(t, s, "\nvendor=x")
	got := trace.SpanContextFromContext(WithRemoteParent(context.Background(), s))
	assert.Equal(t, span.SpanContext().TraceID(), got.TraceID())
	assert.Equal(t, span.SpanContext().SpanID(), got.SpanID())
	assert.True(t, got.IsRemote())
	assert.Equal(t, "vendor=x", got.TraceState().String())

	assert.Empty(t, Inject(context.Background()))
	bg := context.Background()
	for _, bad := range []string{"", "nonsense", "\nvendor=x"} {
		assert.Equal(t, bg, WithRemoteParent(bg, bad), "%q", bad)
	}
}

func TestFailedRecordsTheError(t *testing.T) {
	t.Parallel()
	rec := tracetest.NewSpanRecorder()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(rec))
	_, ok := tp.Tracer("test").Start(context.Background(), "ok")
	Failed(ok, nil)
	ok.End()
	_, bad := tp.Tracer("test").Start(context.Background(), "bad")
	Failed(bad, errors.New("boom"))
	bad.End()
	spans := rec.Ended()
	assert.Equal(t, codes.Unset, spans[0].Status().Code)
	assert.Equal(t, codes.Error, spans[1].Status().Code)
	assert.Equal(t, "boom", spans[1].Status().Description)
	assert.Len(t, spans[1].Events(), 1, "the error is recorded as an event")
}
