package queue

import (
	"context"
	"errors"
	"sync"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"
	"go.opentelemetry.io/otel/metric/noop"
)

// Names of the queue's OpenTelemetry instruments (see pool's for how the
// Prometheus exporter spells them).
const (
	MetricSubmitted        = "shepherd.queue.tasks.submitted"
	MetricAttempts         = "shepherd.queue.attempts"
	MetricRequeued         = "shepherd.queue.tasks.requeued"
	MetricProcessesDead    = "shepherd.queue.processes.dead"
	MetricDeadDropped      = "shepherd.queue.dead_letters.dropped"
	MetricRevived          = "shepherd.queue.process.revived"
	MetricStateLost        = "shepherd.queue.state_lost"
	MetricSubmitDuration   = "shepherd.queue.submit.duration"
	MetricProcessing       = "shepherd.queue.processing.duration"
	MetricQueueWait        = "shepherd.queue.wait.duration"
	MetricDepth            = "shepherd.queue.depth"
	MetricWorkers          = "shepherd.queue.workers"
	MetricDepthOverWorkers = "shepherd.queue.depth_over_workers"
	MetricTenant           = "shepherd.queue.tenant"
	MetricLimit            = "shepherd.queue.limit"
	MetricLimitInFlight    = "shepherd.queue.limit.in_flight"
	MetricLimitDrops       = "shepherd.queue.limit.drops"
	MetricTenantRefused    = "shepherd.queue.tenant.refused"
	MetricDeduplicated     = "shepherd.queue.tasks.deduplicated"
	MetricAheadGivenBack   = "shepherd.queue.ahead.given_back"
	MetricFailovers        = "shepherd.queue.failovers"
)

type metrics struct {
	attrs metric.MeasurementOption // queue=<name>

	submitted, attempts, requeued, procsDead, deadDropped, revived, stateLost, refused, limitDrops, deduplicated, aheadGivenBack, failovers metric.Int64Counter
	submitDuration, processing, queueWait                                                                                                   metric.Float64Histogram

	reg metric.Registration

	mu        sync.Mutex
	overSince time.Time
}

func outcomeAttr(kind string) metric.AddOption {
	return metric.WithAttributes(attribute.String("outcome", kind))
}

// newMetrics makes the instruments; without a MeterProvider they are
// no-ops. Instrument errors are ignored: a provider that refuses one
// leaves a no-op in its place.
func newMetrics(mp metric.MeterProvider, q *Queue) *metrics {
	enabled := mp != nil
	if mp == nil {
		mp = noop.NewMeterProvider()
	}
	meter := mp.Meter("github.com/shepherd-go/shepherd/queue")
	nm := noop.NewMeterProvider().Meter("")
	m := &metrics{attrs: metric.WithAttributes(attribute.String("queue", q.name))}
	counter := func(name, unit, desc string) metric.Int64Counter {
		c, err := meter.Int64Counter(name, metric.WithDescription(desc), metric.WithUnit(unit))
		if err != nil {
			c, _ = nm.Int64Counter(name)
		}
		return c
	}
	histogram := func(name, desc string) metric.Float64Histogram {
		h, err := meter.Float64Histogram(name, metric.WithDescription(desc), metric.WithUnit("s"))
		if err != nil {
			h, _ = nm.Float64Histogram(name)
		}
		return h
	}
	m.submitted = counter(MetricSubmitted, "{task}", "Tasks queued by Submit in this process.")
	m.attempts = counter(MetricAttempts, "{attempt}", "Attempts ended in this process, by outcome: ok, fail, perm, later, release.")
	m.requeued = counter(MetricRequeued, "{task}", "Tasks of dead processes given back by this process.")
	m.procsDead = counter(MetricProcessesDead, "{process}", "Processes this process declared dead.")
	m.deadDropped = counter(MetricDeadDropped, "{task}", "Dead letters dropped at MaxDeadLetters by this process.")
	m.revived = counter(MetricRevived, "{event}", "Times this process found it had been declared dead and registered again.")
	m.stateLost = counter(MetricStateLost, "{event}", "Times this process found that Redis had lost the queue's state.")
	m.refused = counter(MetricTenantRefused, "{call}", "Submits and Acquires refused in this process, by reason: unknown (tenant), busy (Acquire's wait ran out).")
	m.limitDrops = counter(MetricLimitDrops, "{attempt}", "Attempts in this process that counted as drops for its concurrency limit (RetryLater, timeouts), by partition.")
	m.deduplicated = counter(MetricDeduplicated, "{task}", "Submits in this process refused as duplicates (WithDedup) and handed the first task's future.")
	m.aheadGivenBack = counter(MetricAheadGivenBack, "{task}", "Tasks this process took ahead of its workers and gave back unstarted: no worker picked one for 100 ms.")
	m.failovers = counter(MetricFailovers, "{event}", "Changes of a master's replication history this process saw (failovers, restarts), by lost: true when writes were or may have been lost.")
	m.submitDuration = histogram(MetricSubmitDuration, "Submit calls that queued a task.")
	m.processing = histogram(MetricProcessing, "Handler calls in this process.")
	m.queueWait = histogram(MetricQueueWait, "From when a task was due to when an attempt began.")
	if !enabled {
		return m
	}
	depth, err1 := meter.Int64ObservableGauge(MetricDepth, metric.WithDescription("Tasks of the queue by state."), metric.WithUnit("{task}"))
	workers, err2 := meter.Int64ObservableGauge(MetricWorkers, metric.WithDescription("This process's workers, busy or idle."), metric.WithUnit("{worker}"))
	over, err3 := meter.Float64ObservableGauge(MetricDepthOverWorkers,
		metric.WithDescription("How long the available tasks have stayed at or above the live workers; 0 while below. Alert when it grows."),
		metric.WithUnit("s"))
	tenant, err4 := meter.Int64ObservableGauge(MetricTenant,
		metric.WithDescription("Per tenant: its capacity, load (tasks in flight and Acquire slots) and waiting tasks."), metric.WithUnit("{task}"))
	limitGauge, err5 := meter.Int64ObservableGauge(MetricLimit,
		metric.WithDescription("This process's concurrency limit (WithConcurrencyLimit or WithLimit), by partition."), metric.WithUnit("{task}"))
	limitInFlight, err6 := meter.Int64ObservableGauge(MetricLimitInFlight,
		metric.WithDescription("Tasks running (or taken to run) within this process's concurrency limit, by partition."), metric.WithUnit("{task}"))
	if err := errors.Join(err1, err2, err3, err4, err5, err6); err != nil {
		q.logger.Warn("queue gauges unavailable", "error", err)
		return m
	}
	state := func(s string) metric.ObserveOption {
		return metric.WithAttributes(attribute.String("queue", q.name), attribute.String("state", s))
	}
	reg, err := meter.RegisterCallback(func(ctx context.Context, o metric.Observer) error {
		q.mu.Lock()
		s := q.server
		q.mu.Unlock()
		if s != nil {
			busy := int64(s.busyCount())
			o.ObserveInt64(workers, busy, metric.WithAttributes(attribute.String("queue", q.name), attribute.String("process", q.proc), attribute.String("state", "busy")))
			o.ObserveInt64(workers, int64(s.size())-busy, metric.WithAttributes(attribute.String("queue", q.name), attribute.String("process", q.proc), attribute.String("state", "idle")))
			if s.lim != nil {
				at := metric.WithAttributes(attribute.String("queue", q.name), attribute.String("process", q.proc), attribute.String("partition", s.part.pub))
				o.ObserveInt64(limitGauge, int64(s.Limit()), at)
				o.ObserveInt64(limitInFlight, int64(s.lim.p.PartitionInFlight(s.part.name)), at)
			}
		}
		st, err := q.Stats(ctx)
		if err != nil {
			return err
		}
		o.ObserveInt64(depth, st.Available, state("available"))
		o.ObserveInt64(depth, st.Delayed, state("delayed"))
		o.ObserveInt64(depth, st.Retrying, state("retrying"))
		o.ObserveInt64(depth, st.InFlight, state("in_flight"))
		o.ObserveInt64(depth, st.Dead, state("dead"))
		o.ObserveFloat64(over, m.observe(time.Now(), st.Available, st.Workers).Seconds(), metric.WithAttributes(attribute.String("queue", q.name)))
		for _, t := range st.Tenants {
			of := func(what string) metric.ObserveOption {
				return metric.WithAttributes(attribute.String("queue", q.name), attribute.String("tenant", t.ID), attribute.String("of", what))
			}
			o.ObserveInt64(tenant, t.Capacity, of("capacity"))
			o.ObserveInt64(tenant, t.Load, of("load"))
			o.ObserveInt64(tenant, t.Waiting, of("waiting"))
		}
		return nil
	}, depth, workers, over, tenant, limitGauge, limitInFlight)
	if err != nil {
		q.logger.Warn("queue gauges unavailable", "error", err)
		return m
	}
	m.reg = reg
	return m
}

// observe records a sample of the available tasks against the live
// workers and returns how long they have been at or above them. An empty
// queue is never an alarm, even with no worker.
func (m *metrics) observe(now time.Time, available, workers int64) time.Duration {
	m.mu.Lock()
	defer m.mu.Unlock()
	if available == 0 || available < workers {
		m.overSince = time.Time{}
		return 0
	}
	if m.overSince.IsZero() {
		m.overSince = now
	}
	return now.Sub(m.overSince)
}

func (m *metrics) tenantRefused(ctx context.Context, reason string) {
	m.refused.Add(ctx, 1, m.attrs, metric.WithAttributes(attribute.String("reason", reason)))
}

func (m *metrics) close() {
	if m.reg != nil {
		_ = m.reg.Unregister()
	}
}

// limitAttrs are the attributes of a server's drops.
func (m *metrics) limitAttrs(s *Server) metric.AddOption {
	return metric.WithAttributes(attribute.String("queue", s.q.name), attribute.String("partition", s.part.pub))
}
