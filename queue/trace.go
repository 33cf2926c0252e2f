package queue

import (
	"context"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/trace"

	"github.com/shepherd-go/shepherd/internal/tracectx"
)

// WithTracerProvider traces tasks with tp's tracer: Submit runs in a
// producer span ("send NAME"), whose context is stored with the task (W3C
// trace context: the traceparent and tracestate headers), and each
// attempt's handler runs in a consumer span ("process NAME") that is its
// child, in whatever process serves it; the handler's ctx carries that
// span. An attempt's span records its result (ok, fail, perm, later,
// release; an error with its message) and, once Redis recorded it, what
// became of the task (done, retry, later, dead, cancelled, released; STALE
// for an outcome that came too late). Defaults to none: nothing is traced,
// and nothing is stored.
func WithTracerProvider(tp trace.TracerProvider) Option {
	return func(c *config) error {
		if tp == nil {
			return invalid("nil tracer provider")
		}
		c.tracer = tp.Tracer("github.com/shepherd-go/shepherd/queue")
		return nil
	}
}

// Attributes of the queue's spans, beside OpenTelemetry's messaging ones.
const (
	AttrAttempt       = attribute.Key("shepherd.task.attempt")        // the attempt's number
	AttrTenant        = attribute.Key("shepherd.task.tenant")         // the task's tenant, when it has one
	AttrAttemptResult = attribute.Key("shepherd.task.attempt_result") // ok, fail, perm, later, release
	AttrOutcome       = attribute.Key("shepherd.task.outcome")        // what Redis recorded
)

// startSend starts the producer span of a Submit (nil tracer: none).
func (q *Queue) startSend(ctx context.Context) (context.Context, trace.Span) {
	if q.cfg.tracer == nil {
		return ctx, nil
	}
	return q.cfg.tracer.Start(ctx, "send "+q.name, trace.WithSpanKind(trace.SpanKindProducer),
		trace.WithAttributes(attribute.String("messaging.system", "shepherd"),
			attribute.String("messaging.operation.type", "send"),
			attribute.String("messaging.destination.name", q.name)))
}

// endSend ends a Submit's span with its task id and error.
func endSend(span trace.Span, id string, err error) {
	if span == nil {
		return
	}
	span.SetAttributes(attribute.String("messaging.message.id", id))
	tracectx.Failed(span, err)
	span.End()
}

// startProcess starts the consumer span of an attempt as a child of the
// span stored with the task (none: a root span), in ctx.
func (q *Queue) startProcess(ctx context.Context, t *Task) (context.Context, trace.Span) {
	if q.cfg.tracer == nil {
		return ctx, nil
	}
	ctx = tracectx.WithRemoteParent(ctx, t.trace)
	attrs := []attribute.KeyValue{attribute.String("messaging.system", "shepherd"),
		attribute.String("messaging.operation.type", "process"),
		attribute.String("messaging.destination.name", q.name),
		attribute.String("messaging.message.id", t.ID), AttrAttempt.Int(t.Attempt)}
	if t.Tenant != "" {
		attrs = append(attrs, AttrTenant.String(t.Tenant))
	}
	return q.cfg.tracer.Start(ctx, "process "+q.name, trace.WithSpanKind(trace.SpanKindConsumer), trace.WithAttributes(attrs...))
}

// attemptEnded records an attempt's result on its span.
func attemptEnded(span trace.Span, kind string, err error) {
	if span == nil {
		return
	}
	span.SetAttributes(AttrAttemptResult.String(kind))
	tracectx.Failed(span, err)
}

// recorded ends an attempt's span with what Redis recorded of it.
func recorded(span trace.Span, outcome string) {
	if span == nil {
		return
	}
	span.SetAttributes(AttrOutcome.String(outcome))
	span.End()
}
