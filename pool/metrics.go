package pool

import (
	"context"
	"errors"
	"sync"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"
	"go.opentelemetry.io/otel/metric/noop"
)

// Names of the node's OpenTelemetry instruments. The Prometheus exporter
// turns dots into underscores, appends the unit ("_seconds") and "_total"
// to counters: shepherd.pool.queue_depth_over_workers becomes
// shepherd_pool_queue_depth_over_workers_seconds.
const (
	MetricJobsDispatched        = "shepherd.pool.jobs.dispatched"
	MetricJobsStarted           = "shepherd.pool.jobs.started"
	MetricJobsStartFailures     = "shepherd.pool.jobs.start_failures"
	MetricJobsStopped           = "shepherd.pool.jobs.stopped"
	MetricJobsRequeued          = "shepherd.pool.jobs.requeued"
	MetricJobsMoved             = "shepherd.pool.jobs.moved"
	MetricWorkersDead           = "shepherd.pool.workers.dead"
	MetricNodesDead             = "shepherd.pool.nodes.dead"
	MetricNodeRevived           = "shepherd.pool.node.revived"
	MetricStateLost             = "shepherd.pool.state_lost"
	MetricDispatchDuration      = "shepherd.pool.dispatch.duration"
	MetricStartDuration         = "shepherd.pool.start.duration"
	MetricQueueDepth            = "shepherd.pool.queue.depth"
	MetricJobsRunning           = "shepherd.pool.jobs.running"
	MetricQueueDepthOverWorkers = "shepherd.pool.queue_depth_over_workers"
	MetricDispatchLimited       = "shepherd.pool.dispatch.limited"
	MetricDispatchLimit         = "shepherd.pool.dispatch.limit"
	MetricFailovers             = "shepherd.pool.failovers"
	MetricJobsReconciled        = "shepherd.pool.jobs.reconciled"
)

// metrics holds a node's instruments. Without WithMeterProvider they come
// from the no-op provider: every call is a cheap no-op.
type metrics struct {
	enabled bool
	attrs   metric.MeasurementOption // pool=<name>

	dispatched      metric.Int64Counter
	dispatchLimited metric.Int64Counter
	started         metric.Int64Counter
	startFailures   metric.Int64Counter
	stopped         metric.Int64Counter
	requeued        metric.Int64Counter
	moved           metric.Int64Counter
	dead            metric.Int64Counter
	nodesDead       metric.Int64Counter
	revived         metric.Int64Counter
	failovers       metric.Int64Counter
	reconciled      metric.Int64Counter
	stateLost       metric.Int64Counter
	dispatchDur     metric.Float64Histogram
	startDur        metric.Float64Histogram

	reg metric.Registration // the gauges' callback; nil when disabled

	mu        sync.Mutex
	overSince time.Time // since when depth >= workers; zero while below
	sampled   bool
}

func newMetrics(n *Node) (*metrics, error) {
	mp := n.cfg.meterProvider
	m := &metrics{enabled: mp != nil, attrs: metric.WithAttributes(n.metricAttrs()...)}
	if mp == nil {
		mp = noop.NewMeterProvider()
	}
	meter := mp.Meter("github.com/shepherd-go/shepherd/pool")
	var errs []error
	counter := func(name, desc string) metric.Int64Counter {
		c, err := meter.Int64Counter(name, metric.WithDescription(desc), metric.WithUnit("{job}"))
		errs = append(errs, err)
		return c
	}
	histogram := func(name, desc string) metric.Float64Histogram {
		h, err := meter.Float64Histogram(name, metric.WithDescription(desc), metric.WithUnit("s"))
		errs = append(errs, err)
		return h
	}
	m.dispatched = counter(MetricJobsDispatched, "Jobs admitted by DispatchJob on this node.")
	m.dispatchLimited = counter(MetricDispatchLimited, "DispatchJob calls on this node that found no permit of WithDispatchLimit within its wait.")
	m.started = counter(MetricJobsStarted, "Successful Starts on this node's workers, moves and restarts included.")
	m.startFailures = counter(MetricJobsStartFailures, "Starts that failed or panicked on this node's workers.")
	m.stopped = counter(MetricJobsStopped, "Jobs stopped by StopJob on this node's workers.")
	m.requeued = counter(MetricJobsRequeued, "Jobs queued again by this node: their worker died or their start was stuck or failed after a move.")
	m.moved = counter(MetricJobsMoved, "Jobs this node's workers stopped and handed over: rebalance, RemoveWorker, Close.")
	dead, err := meter.Int64Counter(MetricWorkersDead, metric.WithDescription("Workers this node declared dead."), metric.WithUnit("{worker}"))
	errs = append(errs, err)
	m.dead = dead
	event := func(name, unit, desc string) metric.Int64Counter {
		c, err := meter.Int64Counter(name, metric.WithDescription(desc), metric.WithUnit(unit))
		errs = append(errs, err)
		return c
	}
	m.nodesDead = event(MetricNodesDead, "{node}", "Nodes this node declared dead and removed (no keep-alive for longer than WorkerTTL).")
	m.revived = event(MetricNodeRevived, "{event}", "Times this node found it had been declared dead (paused or cut off for longer than WorkerTTL) and rejoined.")
	m.failovers = event(MetricFailovers, "{event}", "Changes of the master's replication history this node saw (failovers, restarts), by lost: true when writes were or may have been lost.")
	m.reconciled = counter(MetricJobsReconciled, "Jobs this node's workers stopped (no record) or started (recorded, not running) after a failover that lost writes.")
	m.stateLost = event(MetricStateLost, "{event}", "Times this node found that Redis had lost the pool's state (restarted empty).")
	m.dispatchDur = histogram(MetricDispatchDuration, "DispatchJob calls that got Start's outcome: from the call to the outcome.")
	m.startDur = histogram(MetricStartDuration, "Start handler calls on this node's workers.")

	depth, err := meter.Int64ObservableGauge(MetricQueueDepth, metric.WithDescription("Entries waiting in the pool's job stream."), metric.WithUnit("{job}"))
	errs = append(errs, err)
	running, err := meter.Int64ObservableGauge(MetricJobsRunning, metric.WithDescription("Jobs running on this node's workers."), metric.WithUnit("{job}"))
	errs = append(errs, err)
	over, err := meter.Float64ObservableGauge(MetricQueueDepthOverWorkers,
		metric.WithDescription("How long the queue depth has stayed at or above the number of workers; 0 while it is below. Alert when it grows."),
		metric.WithUnit("s"))
	errs = append(errs, err)
	dlimit, err := meter.Int64ObservableGauge(MetricDispatchLimit,
		metric.WithDescription("This node's dispatch limit (WithDispatchLimit): the limit, calls in flight and calls waiting, by \"of\"."), metric.WithUnit("{call}"))
	errs = append(errs, err)
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	if !m.enabled {
		return m, nil
	}
	nodeAttrs := metric.WithAttributes(append(n.metricAttrs(), attribute.String("node", n.id))...)
	m.reg, err = meter.RegisterCallback(func(ctx context.Context, o metric.Observer) error {
		o.ObserveInt64(running, n.runningJobs(), nodeAttrs)
		if n.dispatchLim != nil {
			dl := n.DispatchLimit()
			of := func(what string) metric.ObserveOption {
				return metric.WithAttributes(append(n.metricAttrs(), attribute.String("node", n.id), attribute.String("of", what))...)
			}
			o.ObserveInt64(dlimit, int64(dl.Limit), of("limit"))
			o.ObserveInt64(dlimit, int64(dl.InFlight), of("in_flight"))
			o.ObserveInt64(dlimit, int64(dl.Waiting), of("waiting"))
		}
		d, err := m.sample(ctx, n)
		if err != nil {
			return err
		}
		o.ObserveInt64(depth, d, m.attrs)
		o.ObserveFloat64(over, m.overFor(time.Now()).Seconds(), m.attrs)
		return nil
	}, depth, running, over, dlimit)
	if err != nil {
		return nil, err
	}
	return m, nil
}

// metricAttrs are the attributes of the node's metrics: the pool, and
// on a pool of several shards (WithShards) the shard.
func (n *Node) metricAttrs() []attribute.KeyValue {
	attrs := []attribute.KeyValue{attribute.String("pool", n.name)}
	if n.cfg.shards > 1 {
		attrs = append(attrs, attribute.Int("shard", n.shard))
	}
	return attrs
}

// close unregisters the gauges' callback, so a closed node reports nothing.
func (m *metrics) close() {
	if m.reg != nil {
		_ = m.reg.Unregister()
	}
}

// sample reads the queue depth and the number of workers and updates the
// alarm state. A no-op without a MeterProvider: it costs a round trip.
func (m *metrics) sample(ctx context.Context, n *Node) (int64, error) {
	if !m.enabled {
		return 0, nil
	}
	pipe := n.rdb.Pipeline()
	depth := pipe.XLen(ctx, n.lay.jobStream)
	workers := pipe.HLen(ctx, n.lay.workers)
	if _, err := pipe.Exec(ctx); err != nil {
		return 0, err
	}
	m.observe(time.Now(), depth.Val(), workers.Val())
	return depth.Val(), nil
}

// observe records one sample of the queue depth against the workers. An
// empty queue is never an alarm, even with no worker.
func (m *metrics) observe(now time.Time, depth, workers int64) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.sampled = true
	if depth == 0 || depth < workers {
		m.overSince = time.Time{}
		return
	}
	if m.overSince.IsZero() {
		m.overSince = now
	}
}

// overFor returns how long the queue has been at or above the workers.
func (m *metrics) overFor(now time.Time) time.Duration {
	m.mu.Lock()
	defer m.mu.Unlock()
	if !m.sampled || m.overSince.IsZero() {
		return 0
	}
	return now.Sub(m.overSince)
}

// dispatchDone records a DispatchJob's latency, when Start's outcome came
// back, and passes its error through.
func (m *metrics) dispatchDone(ctx context.Context, began time.Time, err error) error {
	m.dispatchDur.Record(ctx, time.Since(began).Seconds(), m.attrs)
	return err
}

// startDone records a Start's latency and outcome.
func (m *metrics) startDone(ctx context.Context, began time.Time, err error) {
	m.startDur.Record(ctx, time.Since(began).Seconds(), m.attrs)
	if err != nil {
		m.startFailures.Add(ctx, 1, m.attrs)
	}
}

// add adds v to counter c with the pool attribute.
func (m *metrics) add(ctx context.Context, c metric.Int64Counter, v int64) {
	c.Add(ctx, v, m.attrs)
}

// runningJobs sums the jobs running on the node's workers.
func (n *Node) runningJobs() int64 {
	n.mu.Lock()
	defer n.mu.Unlock()
	var sum int64
	for _, w := range n.myWorkers {
		sum += w.running.Load()
	}
	return sum
}

// tick samples the queue for the alarm gauge between collections, so that
// a dip of the queue below the workers is seen even if no collection
// happens during it. Failures are logged at debug level: the next tick or
// collection tries again.
func (m *metrics) tick(ctx context.Context, n *Node) {
	if _, err := m.sample(ctx, n); err != nil && n.ctx.Err() == nil {
		n.logger.Debug("sampling the queue for metrics", "error", err)
	}
}
