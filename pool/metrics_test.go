package pool

import (
	"context"
	"testing"
	"time"

	"github.com/shepherd-go/shepherd/internal/redistest"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"
)

// meterReader returns a MeterProvider option and its manual reader.
func meterReader(t *testing.T) (NodeOption, *sdkmetric.ManualReader) {
	reader := sdkmetric.NewManualReader()
	mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(reader))
	t.Cleanup(func() { _ = mp.Shutdown(context.Background()) })
	return WithMeterProvider(mp), reader
}

// collected holds one collection: counters and gauges summed over their
// data points, histograms as counts.
type collected map[string]float64

func collect(t *testing.T, r *sdkmetric.ManualReader) collected {
	t.Helper()
	var rm metricdata.ResourceMetrics
	require.NoError(t, r.Collect(context.Background(), &rm))
	out := collected{}
	for _, sm := range rm.ScopeMetrics {
		for _, m := range sm.Metrics {
			switch d := m.Data.(type) {
			case metricdata.Sum[int64]:
				for _, p := range d.DataPoints {
					out[m.Name] += float64(p.Value)
				}
			case metricdata.Gauge[int64]:
				for _, p := range d.DataPoints {
					out[m.Name] += float64(p.Value)
				}
			case metricdata.Gauge[float64]:
				for _, p := range d.DataPoints {
					out[m.Name] += p.Value
				}
			case metricdata.Histogram[float64]:
				for _, p := range d.DataPoints {
					out[m.Name] += float64(p.Count)
				}
			}
		}
	}
	return out
}

func TestMetricsCountWhatHappened(t *testing.T) {
	t.Parallel()
	ctx := testCtx(t, 30*time.Second)
	opt, reader := meterReader(t)
	n := addNode(t, srv.Client(), redistest.Name(t), opt)
	rec := newRecorder()
	rec.failKeys["bad"] = true
	ws := addWorkers(t, n, rec, 2)

	for i := 0; i < 8; i++ {
		require.NoError(t, n.DispatchJob(ctx, keyN(i), nil))
	}
	var startErr *StartError
	require.ErrorAs(t, n.DispatchJob(ctx, "bad", nil), &startErr)
	require.NoError(t, n.StopJob(ctx, keyN(0)))
	require.NoError(t, n.StopJob(ctx, keyN(1)))

	// A start is answered by the script that records it, so the worker
	// counts it just after DispatchJob returned: wait for the counts.
	var m map[string]float64
	require.Eventually(t, func() bool {
		m = collect(t, reader)
		return m[MetricJobsStarted] == 8 && m[MetricStartDuration] == 9
	}, 5*time.Second, 10*time.Millisecond, "start counts")
	assert.Equal(t, 9.0, m[MetricJobsDispatched])
	assert.Equal(t, 8.0, m[MetricJobsStarted])
	assert.Equal(t, 1.0, m[MetricJobsStartFailures])
	assert.Equal(t, 2.0, m[MetricJobsStopped])
	assert.Equal(t, 9.0, m[MetricDispatchDuration], "one latency per DispatchJob that got an outcome")
	assert.Equal(t, 9.0, m[MetricStartDuration], "one latency per Start call")
	assert.Zero(t, m[MetricJobsMoved])
	assert.Zero(t, m[MetricQueueDepth])
	assert.Zero(t, m[MetricQueueDepthOverWorkers])
	require.Eventually(t, func() bool { return collect(t, reader)[MetricJobsRunning] == 6 },
		5*time.Second, 10*time.Millisecond, "running jobs gauge")

	// Removing a worker hands its jobs over: each is moved and started again.
	st, err := n.Stats(ctx)
	require.NoError(t, err)
	var held int
	for _, w := range st.Workers {
		if w.ID == ws[0].ID() {
			held = len(w.Keys)
		}
	}
	require.NoError(t, n.RemoveWorker(ctx, ws[0]))
	require.Eventually(t, func() bool {
		m := collect(t, reader)
		return m[MetricJobsMoved] == float64(held) && m[MetricJobsStarted] == float64(8+held) && m[MetricJobsRunning] == 6
	}, 10*time.Second, 20*time.Millisecond)
}

func TestMetricsDeadWorkerAndRequeue(t *testing.T) {
	t.Parallel()
	ctx := testCtx(t, 30*time.Second)
	name := redistest.Name(t)
	opt, reader := meterReader(t)
	a := addNode(t, srv.Client(), name, opt)
	addWorkers(t, a, newRecorder(), 1)
	b := addNode(t, srv.Client(), name)
	recB := newRecorder()
	addWorkers(t, b, recB, 1)
	for i := 0; i < 10; i++ {
		require.NoError(t, a.DispatchJob(ctx, keyN(i), nil))
	}
	onB := len(recB.runningKeys())
	require.NotZero(t, onB, "jump hash gives both workers some of 10 keys")
	// The worker counts a start just after the script that recorded it
	// answered DispatchJob: wait until a's count is complete.
	require.Eventually(t, func() bool {
		return collect(t, reader)[MetricJobsStarted] == float64(10-onB)
	}, 5*time.Second, 10*time.Millisecond, "a counts the starts of its own jobs")
	b.crash()

	require.Eventually(t, func() bool {
		m := collect(t, reader)
		return m[MetricWorkersDead] == 1 && m[MetricJobsRequeued] == float64(onB) &&
			m[MetricJobsStarted] == 10 && m[MetricJobsRunning] == 10
	}, 15*time.Second, 50*time.Millisecond)
}

func TestMetricsQueueOverWorkersAlarm(t *testing.T) {
	t.Parallel()
	ctx := testCtx(t, 30*time.Second)
	opt, reader := meterReader(t)
	n := addNode(t, srv.Client(), redistest.Name(t), opt)
	dctx, cancel := context.WithCancel(ctx)
	defer cancel()
	done := make(chan error, 1)
	go func() { done <- n.DispatchJob(dctx, "waiting", nil) }()

	// One queued job and no worker: the queue is not below the workers.
	require.Eventually(t, func() bool {
		m := collect(t, reader)
		return m[MetricQueueDepth] == 1 && m[MetricQueueDepthOverWorkers] > 0.2
	}, 10*time.Second, 20*time.Millisecond)

	addWorkers(t, n, newRecorder(), 1)
	select {
	case err := <-done:
		require.NoError(t, err)
	case <-ctx.Done():
		t.Fatal("the queued job did not start")
	}
	require.Eventually(t, func() bool {
		m := collect(t, reader)
		return m[MetricQueueDepth] == 0 && m[MetricQueueDepthOverWorkers] == 0
	}, 10*time.Second, 20*time.Millisecond)
}

func TestMetricsStopWithTheNode(t *testing.T) {
	t.Parallel()
	ctx := testCtx(t, 10*time.Second)
	opt, reader := meterReader(t)
	n := addNode(t, srv.Client(), redistest.Name(t), opt)
	addWorkers(t, n, newRecorder(), 1)
	require.NoError(t, n.DispatchJob(ctx, "a", nil))
	_, ok := collect(t, reader)[MetricJobsRunning]
	require.True(t, ok, "the gauges report while the node is open")
	require.NoError(t, n.Close(ctx))
	m := collect(t, reader) // must not touch Redis for a closed node, nor fail
	_, ok = m[MetricJobsRunning]
	assert.False(t, ok, "a closed node reports no gauge")
	assert.Equal(t, 1.0, m[MetricJobsDispatched], "counters keep their totals")
}

func TestMetricsAlarmState(t *testing.T) {
	t.Parallel()
	m := &metrics{}
	t0 := time.Unix(1000, 0)
	assert.Zero(t, m.overFor(t0), "no sample yet")
	m.observe(t0, 0, 0)
	assert.Zero(t, m.overFor(t0.Add(time.Minute)), "an empty queue is no alarm")
	m.observe(t0, 3, 3)
	m.observe(t0.Add(5*time.Second), 4, 3)
	assert.Equal(t, 10*time.Second, m.overFor(t0.Add(10*time.Second)))
	m.observe(t0.Add(11*time.Second), 2, 3)
	assert.Zero(t, m.overFor(t0.Add(12*time.Second)))
}

func TestWithMeterProviderRejectsNil(t *testing.T) {
	t.Parallel()
	_, err := AddNode(testCtx(t, 5*time.Second), srv.Client(), redistest.Name(t), WithMeterProvider(nil))
	assert.ErrorIs(t, err, ErrInvalidOption)
}
