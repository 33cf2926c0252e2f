package main

import (
	"context"
	"errors"
	"math/rand/v2"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/shepherd-go/shepherd/queue"
)

// T6's machinery: the simulated downstream of hidden capacity, the load
// that keeps a backlog or offers a rate, and the servers and samples of a
// run.

// downstream simulates a service with a hidden capacity: a call made
// while n calls are in progress (itself included) takes base × max(1,
// n/capacity), ±10% jitter. Past the capacity the throughput stays at
// capacity/base and only the latency grows, like a server that shares
// its cores between its requests.
type downstream struct {
	base     time.Duration
	capacity atomic.Int64
	inflight atomic.Int64

	mu    sync.Mutex
	calls []call
}

// call is one call's end and how long it took, as its caller saw it.
type call struct {
	end     time.Time
	latency time.Duration
	class   string
}

func newDownstream(capacity int) *downstream {
	d := &downstream{base: t6Base}
	d.capacity.Store(int64(capacity))
	return d
}

func (d *downstream) call(ctx context.Context, class string) error {
	n := d.inflight.Add(1)
	defer d.inflight.Add(-1)
	f := max(1, float64(n)/float64(d.capacity.Load())) * (0.9 + 0.2*rand.Float64())
	t0 := time.Now()
	err := sleepCtx(ctx, time.Duration(float64(d.base)*f))
	end := time.Now()
	d.mu.Lock()
	d.calls = append(d.calls, call{end: end, latency: end.Sub(t0), class: class})
	d.mu.Unlock()
	return err
}

// window returns the calls of class ("" for all) that ended in [from, to).
func (d *downstream) window(from, to time.Time, class string) latencies {
	d.mu.Lock()
	defer d.mu.Unlock()
	var l latencies
	for _, c := range d.calls {
		if !c.end.Before(from) && c.end.Before(to) && (class == "" || c.class == class) {
			l = append(l, c.latency)
		}
	}
	return l
}

// rate is calls per second in a window.
func rate(l latencies, from, to time.Time) float64 {
	return float64(len(l)) / to.Sub(from).Seconds()
}

// limitSample is a server's limit at a moment.
type limitSample struct {
	at    time.Time
	limit int
}

// settledAt returns how long after from the limit entered ±30% of target
// to stay there for hold (every sample), or -1 if it never did; and the
// share of the samples from then on that are within the band (a
// disturbance later, a GC or a stalled VM, shows there, not as a later
// settling).
func settledAt(samples []limitSample, from time.Time, target float64, hold time.Duration) (time.Duration, float64) {
	in := func(s limitSample) bool {
		l := float64(s.limit)
		return l >= 0.7*target && l <= 1.3*target
	}
	for i, s := range samples {
		if s.at.Before(from) || !in(s) {
			continue
		}
		held, j := true, i
		for ; j < len(samples) && samples[j].at.Sub(s.at) < hold; j++ {
			if !in(samples[j]) {
				held = false
				break
			}
		}
		if !held || j == len(samples) {
			continue
		}
		n := 0
		for _, t := range samples[i:] {
			if in(t) {
				n++
			}
		}
		return s.at.Sub(from), float64(n) / float64(len(samples)-i)
	}
	return -1, 0
}

// keepBacklog submits tasks of class to q while it can put a token in
// slots (a handler takes one out as it ends), until ctx ends: slots'
// capacity bounds the tasks unfinished without a polling loop.
func keepBacklog(ctx context.Context, q *queue.Queue, class string, slots chan struct{}) error {
	for {
		select {
		case slots <- struct{}{}:
		case <-ctx.Done():
			return nil
		}
		if _, err := q.Submit(ctx, []byte(class)); err != nil {
			<-slots
			if ctx.Err() != nil {
				return nil
			}
			return err
		}
	}
}

// offer submits tasks of class to q at perSecond, from 4 goroutines,
// until ctx ends.
func offer(ctx context.Context, q *queue.Queue, class string, perSecond float64) error {
	const goroutines = 4
	interval := time.Duration(float64(time.Second) * goroutines / perSecond)
	errs := make(chan error, goroutines)
	for g := range goroutines {
		go func() {
			next := time.Now().Add(time.Duration(g) * interval / goroutines)
			for {
				if err := sleepCtx(ctx, time.Until(next)); err != nil {
					errs <- nil
					return
				}
				next = next.Add(interval)
				if _, err := q.Submit(ctx, []byte(class)); err != nil && ctx.Err() == nil {
					errs <- err
					return
				}
			}
		}()
	}
	var first error
	for range goroutines {
		if err := <-errs; err != nil && first == nil {
			first = err
		}
	}
	return first
}

// t6Run is one server (or a group sharing a limit) working against a
// downstream while producers keep a backlog.
type t6Run struct {
	d       *downstream
	bqs     []*benchQueue
	servers []*queue.Server
	cancel  context.CancelFunc
	errs    chan error
	nprod   int
}

func (r *t6Run) stop() error {
	r.cancel()
	var err error
	for range r.nprod {
		err = errors.Join(err, <-r.errs)
	}
	for _, bq := range r.bqs {
		bq.close()
	}
	return err
}

// serveAgainst starts a queue served by one process with serve options,
// its handler calling d as class, and a producer keeping a backlog.
func (b *bench) serveAgainst(ctx context.Context, r *t6Run, d *downstream, class string, serve ...queue.ServeOption) (*queue.Server, error) {
	slots := make(chan struct{}, 16*t6Workers)
	h := func(ctx context.Context, t *queue.Task) ([]byte, error) {
		defer func() {
			select {
			case <-slots:
			default: // an attempt again (after a stop cut one off)
			}
		}()
		return nil, d.call(ctx, class)
	}
	bq, err := b.newQueueServing(ctx, "t6"+class, 0, nil, nil)
	if err != nil {
		return nil, err
	}
	r.bqs = append(r.bqs, bq)
	q, err := queue.Open(ctx, b.client(128), bq.name)
	if err != nil {
		return nil, err
	}
	bq.handles = append(bq.handles, q)
	s, err := q.Serve(h, serve...)
	if err != nil {
		return nil, err
	}
	r.servers = append(r.servers, s)
	pctx, cancel := context.WithCancel(ctx)
	prev := r.cancel
	r.cancel = func() {
		cancel()
		if prev != nil {
			prev()
		}
	}
	// 8 submitters and 16 tasks a worker: fewer did not keep up with
	// 3,800 tasks/s while Redis was busy (the workers ran dry).
	for range 8 {
		r.nprod++
		go func() { r.errs <- keepBacklog(pctx, bq.submit, class, slots) }()
	}
	return s, nil
}

// sampleLimit records s's limit every 50 ms until ctx ends.
func sampleLimit(ctx context.Context, s *queue.Server) func() []limitSample {
	var (
		mu      sync.Mutex
		samples []limitSample
	)
	go func() {
		t := time.NewTicker(50 * time.Millisecond)
		defer t.Stop()
		for {
			mu.Lock()
			samples = append(samples, limitSample{at: time.Now(), limit: s.Limit()})
			mu.Unlock()
			select {
			case <-t.C:
			case <-ctx.Done():
				return
			}
		}
	}()
	return func() []limitSample {
		mu.Lock()
		defer mu.Unlock()
		return slices.Clone(samples)
	}
}
