package pool

import (
	"context"
	"fmt"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/trace"

	"github.com/shepherd-go/shepherd/internal/tracectx"
)

// WithTracerProvider traces jobs with tp's tracer: DispatchJob runs in a
// producer span ("dispatch POOL") whose W3C context is stored in the
// job's record, and every Start of the job, on whatever node, runs in a
// consumer span ("start POOL"), its child, which the Start handler's ctx
// carries and which records the key, the attempt and the handler's error.
// Defaults to none: nothing is traced or stored.
func WithTracerProvider(tp trace.TracerProvider) NodeOption {
	return func(c *nodeConfig) error {
		if tp == nil {
			return fmt.Errorf("%w: nil TracerProvider", ErrInvalidOption)
		}
		c.tracer = tp.Tracer("github.com/shepherd-go/shepherd/pool")
		return nil
	}
}

// Attributes of the pool's spans, beside OpenTelemetry's messaging ones.
const (
	AttrJobKey  = attribute.Key("shepherd.job.key")     // the job's key
	AttrAttempt = attribute.Key("shepherd.job.attempt") // the Start's attempt (Job.Attempt)
)

// startDispatch starts DispatchJob's producer span (nil tracer: none).
func (n *Node) startDispatch(ctx context.Context, key string) (context.Context, trace.Span) {
	if n.cfg.tracer == nil {
		return ctx, nil
	}
	return n.cfg.tracer.Start(ctx, "dispatch "+n.name, trace.WithSpanKind(trace.SpanKindProducer),
		trace.WithAttributes(attribute.String("messaging.system", "shepherd"),
			attribute.String("messaging.operation.type", "send"),
			attribute.String("messaging.destination.name", n.name), AttrJobKey.String(key)))
}

// endSpan ends a span with its error, if any.
func endSpan(span trace.Span, err error) {
	if span == nil {
		return
	}
	tracectx.Failed(span, err)
	span.End()
}

// injectTrace renders the span context of ctx for the job's record
// (tracectx.Inject); "" when nothing is traced.
func (n *Node) injectTrace(ctx context.Context) string {
	if n.cfg.tracer == nil {
		return ""
	}
	return tracectx.Inject(ctx)
}

// startStart starts the consumer span of a Start, the child of the span
// stored with the job (none: a root span), in ctx.
func (n *Node) startStart(ctx context.Context, job *Job) (context.Context, trace.Span) {
	if n.cfg.tracer == nil {
		return ctx, nil
	}
	ctx = tracectx.WithRemoteParent(ctx, job.trace)
	return n.cfg.tracer.Start(ctx, "start "+n.name, trace.WithSpanKind(trace.SpanKindConsumer),
		trace.WithAttributes(attribute.String("messaging.system", "shepherd"),
			attribute.String("messaging.operation.type", "process"),
			attribute.String("messaging.destination.name", n.name),
			AttrJobKey.String(job.Key), AttrAttempt.Int(job.Attempt)))
}
