package tracectx

import (
	"context"
	"testing"

	"github.com/stretchr/testify/assert"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
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
