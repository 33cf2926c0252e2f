// Package tracectx carries an OpenTelemetry span context through Redis: a
// pool's job and a queue's task store the span context of the call that
// made them, and the span of each run is its child, in whatever process
// runs it.
package tracectx

import (
	"context"
	"strings"

	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/trace"
)

var w3c = propagation.TraceContext{}

// Inject renders the span context of ctx as one string, the W3C
// traceparent header and, when there is one, "\n" and the tracestate
// header; "" when ctx has no valid span context.
func Inject(ctx context.Context) string {
	c := propagation.MapCarrier{}
	w3c.Inject(ctx, c)
	tp := c.Get("traceparent")
	if tp == "" {
		return ""
	}
	if ts := c.Get("tracestate"); ts != "" {
		return tp + "\n" + ts
	}
	return tp
}

// WithRemoteParent returns ctx carrying the span context s (from Inject)
// as a remote parent; ctx itself when s holds none.
func WithRemoteParent(ctx context.Context, s string) context.Context {
	tp, ts, _ := strings.Cut(s, "\n")
	if tp == "" {
		return ctx
	}
	c := propagation.MapCarrier{"traceparent": tp}
	if ts != "" {
		c["tracestate"] = ts
	}
	parent := trace.SpanContextFromContext(w3c.Extract(context.Background(), c))
	if !parent.IsValid() {
		return ctx
	}
	return trace.ContextWithRemoteSpanContext(ctx, parent)
}

// Failed records err on span, as its error and its status; nothing when
// err is nil.
func Failed(span trace.Span, err error) {
	if err == nil {
		return
	}
	span.RecordError(err)
	span.SetStatus(codes.Error, err.Error())
}
