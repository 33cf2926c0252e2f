package queue

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/otel/attribute"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"

	"github.com/shepherd-go/shepherd/internal/redistest"
)

// collect sums one collection's data points by metric name and, where a
// point has a "state" or "outcome" attribute, by name/value too.
func collect(t *testing.T, r *sdkmetric.ManualReader) map[string]float64 {
	t.Helper()
	var rm metricdata.ResourceMetrics
	require.NoError(t, r.Collect(context.Background(), &rm))
	out := map[string]float64{}
	add := func(name string, attrs attribute.Set, v float64) {
		out[name] += v
		for _, k := range []attribute.Key{"state", "outcome", "of", "reason", "partition"} {
			if a, ok := attrs.Value(k); ok {
				out[name+"/"+a.AsString()] += v
			}
		}
	}
	for _, sm := range rm.ScopeMetrics {
		for _, m := range sm.Metrics {
			switch d := m.Data.(type) {
			case metricdata.Sum[int64]:
				for _, p := range d.DataPoints {
					add(m.Name, p.Attributes, float64(p.Value))
				}
			case metricdata.Gauge[int64]:
				for _, p := range d.DataPoints {
					add(m.Name, p.Attributes, float64(p.Value))
				}
			case metricdata.Gauge[float64]:
				for _, p := range d.DataPoints {
					add(m.Name, p.Attributes, p.Value)
				}
			case metricdata.Histogram[float64]:
				for _, p := range d.DataPoints {
					add(m.Name, p.Attributes, float64(p.Count))
				}
			}
		}
	}
	return out
}

// manualMeter returns a MeterProvider read on demand, shut down when
// the test ends.
func manualMeter(t *testing.T) (*sdkmetric.ManualReader, *sdkmetric.MeterProvider) {
	reader := sdkmetric.NewManualReader()
	mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(reader))
	t.Cleanup(func() { _ = mp.Shutdown(context.Background()) })
	return reader, mp
}

func TestMetricsCountWhatHappened(t *testing.T) {
	t.Parallel()
	reader, mp := manualMeter(t)
	q := open(t, redistest.Name(t), WithMeterProvider(mp))
	ctx := testCtx(t, 10*time.Second)

	// Three tasks wait with no worker: the depth is above the workers.
	var futures []*Future
	for _, p := range []string{"ok", "fail", "ok"} {
		f, err := q.Submit(ctx, []byte(p), WithMaxAttempts(2))
		require.NoError(t, err)
		futures = append(futures, f)
	}
	_, err := q.Submit(ctx, nil, WithDelay(time.Hour))
	require.NoError(t, err)
	m := collect(t, reader)
	assert.Equal(t, 4.0, m[MetricSubmitted])
	assert.Equal(t, 3.0, m[MetricDepth+"/available"])
	assert.Equal(t, 1.0, m[MetricDepth+"/delayed"])
	time.Sleep(20 * time.Millisecond) // lets the alarm's duration grow past 0
	assert.Greater(t, collect(t, reader)[MetricDepthOverWorkers], 0.0, "3 tasks and no worker is an alarm")

	serve(t, q, func(ctx context.Context, t *Task) ([]byte, error) {
		if string(t.Payload) == "fail" {
			return nil, errors.New("no")
		}
		return nil, nil
	}, WithWorkers(2), fastRetries)
	for _, f := range futures {
		_, _ = wait(t, f, 5*time.Second)
	}
	m = collect(t, reader)
	assert.Equal(t, 4.0, m[MetricAttempts], "2 ok and 2 failed attempts")
	assert.Equal(t, 2.0, m[MetricAttempts+"/ok"])
	assert.Equal(t, 2.0, m[MetricAttempts+"/fail"])
	assert.Equal(t, 4.0, m[MetricProcessing])
	assert.Equal(t, 4.0, m[MetricQueueWait])
	assert.Equal(t, 1.0, m[MetricDepth+"/dead"])
	assert.Equal(t, 0.0, m[MetricDepth+"/available"])
	assert.Equal(t, 2.0, m[MetricWorkers], "busy and idle add up to the workers")
	assert.Equal(t, 0.0, m[MetricDepthOverWorkers], "an empty queue is no alarm")
}

func TestTenantAndLimitMetrics(t *testing.T) {
	t.Parallel()
	reader, mp := manualMeter(t)
	q := open(t, redistest.Name(t), WithMeterProvider(mp), WithAcquireWait(10*time.Millisecond))
	ctx := testCtx(t, 10*time.Second)
	require.NoError(t, q.SetTenant(ctx, "a", 1))
	for range 3 {
		_, err := q.Submit(ctx, nil, WithTenant("a"))
		require.NoError(t, err)
	}
	_, err := q.Submit(ctx, nil, WithTenant("nope"))
	require.ErrorIs(t, err, ErrUnknownTenant)
	slot, err := q.Acquire(ctx, "a")
	require.NoError(t, err)
	_, err = q.Acquire(ctx, "a")
	require.ErrorIs(t, err, ErrTenantBusy)
	m := collect(t, reader)
	assert.Equal(t, 1.0, m[MetricTenant+"/capacity"])
	assert.Equal(t, 1.0, m[MetricTenant+"/load"], "the Acquire slot")
	assert.Equal(t, 3.0, m[MetricTenant+"/waiting"])
	assert.Equal(t, 1.0, m[MetricTenantRefused+"/unknown"])
	assert.Equal(t, 1.0, m[MetricTenantRefused+"/busy"])
	require.NoError(t, slot.Release(ctx))

	s := serve(t, q, echo, WithWorkers(3), WithConcurrencyLimit(nil, 2))
	assert.Equal(t, float64(s.Limit()), collect(t, reader)[MetricLimit])
}

func TestSharedLimitMetrics(t *testing.T) {
	t.Parallel()
	reader, mp := manualMeter(t)
	q := open(t, redistest.Name(t), WithMeterProvider(mp))
	ctx := testCtx(t, 10*time.Second)
	l := liveBatch(t, 2, 0.5)
	hold, free := gate(t)
	var laters atomic.Int64
	serve(t, q, func(ctx context.Context, t *Task) ([]byte, error) {
		if string(t.Payload) == "later" && laters.Add(1) == 1 {
			return nil, RetryLater(time.Millisecond, errors.New("busy downstream"))
		}
		if string(t.Payload) == "hold" {
			<-hold
		}
		return nil, nil
	}, WithWorkers(4), WithLimit(l, "live"))
	f, err := q.Submit(ctx, []byte("later"))
	require.NoError(t, err)
	_, err = wait(t, f, 5*time.Second)
	require.NoError(t, err)
	_, err = q.Submit(ctx, []byte("hold"))
	require.NoError(t, err)
	// A server takes permits before it looks for tasks, so an idle
	// worker's permit may be counted for an instant while it finds none
	// (it failed once in CI reading 2): wait for the metric to read the
	// one task that runs.
	var m map[string]float64
	require.Eventually(t, func() bool {
		m = collect(t, reader)
		return l.InFlight() == 1 && m[MetricLimitInFlight+"/live"] == 1
	}, 5*time.Second, time.Millisecond, "the in-flight metric never read the one task that runs")
	free()
	assert.Equal(t, 2.0, m[MetricLimit+"/live"])
	assert.Equal(t, 1.0, m[MetricLimitDrops+"/live"], "RetryLater is a drop")
}
