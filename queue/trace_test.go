package queue

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"

	"github.com/shepherd-go/shepherd/internal/redistest"
)

func attr(s sdktrace.ReadOnlySpan, k attribute.Key) attribute.Value {
	for _, a := range s.Attributes() {
		if a.Key == k {
			return a.Value
		}
	}
	return attribute.Value{}
}

// A task carries its Submit's trace context to the process that serves
// it: each attempt runs in a consumer span, child of the producer span,
// with its result and what Redis recorded of it. Two processes, each
// with its own tracer provider and exporter, share only Redis.
func TestTracesFollowTheTaskAcrossProcesses(t *testing.T) {
	t.Parallel()
	name := redistest.Name(t)
	sent, served := tracetest.NewSpanRecorder(), tracetest.NewSpanRecorder()
	tpSent := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(sent))
	tpServed := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(served))
	submitter := open(t, name, WithTracerProvider(tpSent))
	server := open(t, name, WithTracerProvider(tpServed))
	ctx := testCtx(t, 20*time.Second)
	require.NoError(t, server.SetTenant(ctx, "acme", 2))

	handlerTraces := make(chan trace.SpanContext, 2)
	serve(t, server, func(ctx context.Context, t *Task) ([]byte, error) {
		handlerTraces <- trace.SpanContextFromContext(ctx)
		if t.Attempt == 1 {
			return nil, errors.New("flaky")
		}
		return []byte(t.Tenant), nil
	}, WithWorkers(1), fastRetries)

	parentCtx, parent := tpSent.Tracer("test").Start(ctx, "request")
	f, err := submitter.Submit(parentCtx, []byte("x"), WithTenant("acme"), WithMaxAttempts(3))
	require.NoError(t, err)
	parent.End()
	res, err := wait(t, f, 10*time.Second)
	require.NoError(t, err)
	assert.Equal(t, "acme", string(res), "the handler sees the task's tenant")

	require.Eventually(t, func() bool { return len(served.Ended()) == 2 }, 5*time.Second, time.Millisecond)
	var producer sdktrace.ReadOnlySpan
	for _, s := range sent.Ended() {
		if s.Name() == "send "+name {
			producer = s
		}
	}
	require.NotNil(t, producer, "no producer span")
	assert.Equal(t, trace.SpanKindProducer, producer.SpanKind())
	assert.Equal(t, parent.SpanContext().SpanID(), producer.Parent().SpanID(), "Submit's span is a child of the caller's")
	assert.Equal(t, f.ID(), attr(producer, "messaging.message.id").AsString())

	attempts := served.Ended()
	for i, s := range attempts {
		assert.Equal(t, "process "+name, s.Name())
		assert.Equal(t, trace.SpanKindConsumer, s.SpanKind())
		assert.Equal(t, producer.SpanContext().TraceID(), s.SpanContext().TraceID(), "attempt %d is in the Submit's trace", i+1)
		assert.Equal(t, producer.SpanContext().SpanID(), s.Parent().SpanID(), "attempt %d is a child of the Submit's span", i+1)
		assert.True(t, s.Parent().IsRemote())
		assert.EqualValues(t, i+1, attr(s, AttrAttempt).AsInt64())
		assert.Equal(t, "acme", attr(s, AttrTenant).AsString())
		assert.Equal(t, f.ID(), attr(s, "messaging.message.id").AsString())
		h := <-handlerTraces
		assert.Equal(t, s.SpanContext().SpanID(), h.SpanID(), "the handler's ctx carries the attempt's span")
	}
	assert.Equal(t, "fail", attr(attempts[0], AttrAttemptResult).AsString())
	assert.Equal(t, "retry", attr(attempts[0], AttrOutcome).AsString())
	assert.Equal(t, codes.Error, attempts[0].Status().Code)
	assert.Equal(t, "ok", attr(attempts[1], AttrAttemptResult).AsString())
	assert.Equal(t, "done", attr(attempts[1], AttrOutcome).AsString())
	assert.Equal(t, codes.Unset, attempts[1].Status().Code)
}

// Without WithTracerProvider nothing is traced and nothing is stored.
func TestNoTracerStoresNoTraceContext(t *testing.T) {
	t.Parallel()
	rec := tracetest.NewSpanRecorder()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(rec))
	q := open(t, redistest.Name(t))
	ctx, span := tp.Tracer("test").Start(testCtx(t, 10*time.Second), "request")
	defer span.End()
	f, err := q.Submit(ctx, nil)
	require.NoError(t, err)
	assert.NotContains(t, storedTask(t, ctx, q.rdb, q.lay, f.ID()), fieldTrace)
	_, err = Open(ctx, q.rdb, q.name, WithTracerProvider(nil))
	assert.ErrorIs(t, err, ErrInvalidOption)
}

// spanLogger writes every span that ends to stderr, one line each, for
// a child process's parent to read.
type spanLogger struct{}

func (spanLogger) OnStart(context.Context, sdktrace.ReadWriteSpan) {}
func (spanLogger) OnEnd(s sdktrace.ReadOnlySpan) {
	fmt.Fprintf(os.Stderr, "span name=%q trace=%s parent=%s outcome=%s\n", s.Name(), s.SpanContext().TraceID(),
		s.Parent().SpanID(), attr(s, AttrOutcome).AsString())
}
func (spanLogger) Shutdown(context.Context) error   { return nil }
func (spanLogger) ForceFlush(context.Context) error { return nil }

// The same across two OS processes: the task's attempt span, ended in a
// child process that serves it, is a child of the Submit's span here.
func TestTracesCrossAProcessBoundary(t *testing.T) {
	t.Parallel()
	name := redistest.Name(t)
	rec := tracetest.NewSpanRecorder()
	q := open(t, name, WithTTL(2*time.Second), WithTracerProvider(sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(rec))))
	c := startChild(t, name, 2*time.Second, 1, 0, "CHILD_TRACE=1")
	ctx := testCtx(t, 20*time.Second)
	f, err := q.Submit(ctx, nil)
	require.NoError(t, err)
	res, err := wait(t, f, 10*time.Second)
	require.NoError(t, err)
	require.Equal(t, "child", string(res))
	require.Len(t, rec.Ended(), 1)
	send := rec.Ended()[0].SpanContext()
	want := fmt.Sprintf("span name=%q trace=%s parent=%s outcome=done", "process "+name, send.TraceID(), send.SpanID())
	require.Eventually(t, func() bool { return c.count(want) == 1 }, 5*time.Second, 5*time.Millisecond,
		"the child's log has no %q:\n%s", want, strings.Join(c.log(), "\n"))
}
