package main

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/shepherd-go/shepherd/pool"
)

// startEvent is one Start or Stop a bench handler saw.
type startEvent struct {
	key    string
	worker int
	at     time.Time
	stop   bool
}

// startLog records every Start and Stop of a bench, from any worker or
// worker process, and who runs each key now.
type startLog struct {
	mu      sync.Mutex
	events  []startEvent
	starts  map[string]int       // key → Starts so far
	first   map[string]time.Time // key → its first Start
	owner   map[string]int       // key → worker running it
	changed chan struct{}        // capacity 1: something was recorded
}

func newStartLog() *startLog {
	return &startLog{starts: map[string]int{}, first: map[string]time.Time{}, owner: map[string]int{},
		changed: make(chan struct{}, 1)}
}

func (l *startLog) record(e startEvent) {
	l.mu.Lock()
	l.events = append(l.events, e)
	if e.stop {
		if w, ok := l.owner[e.key]; ok && w == e.worker {
			delete(l.owner, e.key)
		}
	} else {
		l.starts[e.key]++
		if _, ok := l.first[e.key]; !ok {
			l.first[e.key] = e.at
		}
		l.owner[e.key] = e.worker
	}
	l.mu.Unlock()
	select {
	case l.changed <- struct{}{}:
	default:
	}
}

// waitFor waits until cond, called under the log's lock, holds.
func (l *startLog) waitFor(ctx context.Context, timeout time.Duration, cond func() bool) error {
	deadline := time.NewTimer(timeout)
	defer deadline.Stop()
	for {
		l.mu.Lock()
		ok := cond()
		l.mu.Unlock()
		if ok {
			return nil
		}
		select {
		case <-l.changed:
		case <-deadline.C:
			return fmt.Errorf("condition not met within %v", timeout)
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}

// duplicates returns how many keys were started more than once.
func (l *startLog) duplicates() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	d := 0
	for _, c := range l.starts {
		if c > 1 {
			d++
		}
	}
	return d
}

// benchHandler is a worker's JobHandler: Start and Stop return at once
// after recording themselves.
type benchHandler struct {
	worker int
	log    *startLog
}

func (h *benchHandler) Start(_ context.Context, job *pool.Job) error {
	h.log.record(startEvent{key: job.Key, worker: h.worker, at: time.Now()})
	return nil
}

func (h *benchHandler) Stop(_ context.Context, key string) error {
	h.log.record(startEvent{key: key, worker: h.worker, at: time.Now(), stop: true})
	return nil
}

// benchPool is an in-process pool: full nodes with workers, and a
// client-only node that dispatches. Every node has its own client.
type benchPool struct {
	name    string
	client  *pool.Node
	nodes   []*pool.Node
	workers []*pool.Worker // in the order added: workers[0] is the oldest
	clients []redis.UniversalClient
	log     *startLog
}

var poolSeq atomic.Int64

// newPool builds a pool with nodes full nodes of perNode workers each.
func (b *bench) newPool(ctx context.Context, scenario string, nodes, perNode int, opts ...pool.NodeOption) (*benchPool, error) {
	return newPoolOn(ctx, benchPoolName(scenario), nodes, perNode,
		func(size int) redis.UniversalClient { return b.client(size) }, opts...)
}

// benchPoolName returns a new pool name for scenario.
func benchPoolName(scenario string) string {
	return "bench-" + scenario + "-" + strconv.FormatInt(time.Now().UnixNano(), 36) + "-" + strconv.FormatInt(poolSeq.Add(1), 10)
}

// newPoolOn is newPool with the pool's name, on the clients newClient
// makes (of a connection pool of the size given).
func newPoolOn(ctx context.Context, name string, nodes, perNode int, newClient func(poolSize int) redis.UniversalClient,
	opts ...pool.NodeOption) (*benchPool, error) {
	p := &benchPool{
		name: name,
		log:  newStartLog(),
	}
	ok := false
	defer func() {
		if !ok {
			p.close(ctx)
		}
	}()
	for range nodes {
		c := newClient(16 + 4*perNode)
		p.clients = append(p.clients, c)
		n, err := pool.AddNode(ctx, c, p.name, opts...)
		if err != nil {
			return nil, err
		}
		p.nodes = append(p.nodes, n)
	}
	for i := range nodes * perNode {
		// Round-robin over the nodes, so that workers[0] is the oldest.
		w, err := p.nodes[i%nodes].AddWorker(ctx, &benchHandler{worker: i, log: p.log})
		if err != nil {
			return nil, err
		}
		p.workers = append(p.workers, w)
	}
	c := newClient(256)
	p.clients = append(p.clients, c)
	n, err := pool.AddNode(ctx, c, p.name, append(opts, pool.WithClientOnly())...)
	if err != nil {
		return nil, err
	}
	p.client = n
	ok = true
	return p, nil
}

// shutdown shuts the pool down from the client node and returns how long
// that took; it then closes everything.
func (p *benchPool) shutdown(ctx context.Context) (time.Duration, error) {
	start := time.Now()
	err := p.client.Shutdown(ctx)
	took := time.Since(start)
	for _, n := range p.nodes {
		select {
		case <-n.Done():
		case <-ctx.Done():
			return took, ctx.Err()
		}
	}
	return took, errors.Join(err, p.close(ctx))
}

// close closes every node and client (a no-op for closed nodes).
func (p *benchPool) close(ctx context.Context) error {
	var errs []error
	if p.client != nil {
		errs = append(errs, p.client.Close(ctx))
	}
	for _, n := range p.nodes {
		errs = append(errs, n.Close(ctx))
	}
	for _, c := range p.clients {
		errs = append(errs, c.Close())
	}
	return errors.Join(errs...)
}

// dispatchStats is what a batch of dispatches measured.
type dispatchStats struct {
	elapsed time.Duration // first dispatch → last DispatchJob returned
	lat     latencies     // DispatchJob latency per job
	begin   []time.Time   // when each dispatch began
	errors  int
	err     error // the first error, to report
}

// keyName is the key of job i.
func keyName(i int) string { return "k" + strconv.Itoa(i) }

// dispatch dispatches the jobs from..to-1 with producers goroutines and
// payloads of 64 bytes.
func dispatch(ctx context.Context, n *pool.Node, from, to, producers int) dispatchStats {
	payload := make([]byte, 64)
	for i := range payload {
		payload[i] = 'a' + byte(i%26)
	}
	st := dispatchStats{lat: make(latencies, to-from), begin: make([]time.Time, to-from)}
	var next atomic.Int64
	var mu sync.Mutex
	var wg sync.WaitGroup
	start := time.Now()
	for range producers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				i := int(next.Add(1)) - 1
				if i >= to-from {
					return
				}
				st.begin[i] = time.Now()
				err := n.DispatchJob(ctx, keyName(from+i), payload)
				st.lat[i] = time.Since(st.begin[i])
				if err != nil {
					mu.Lock()
					st.errors++
					if st.err == nil {
						st.err = err
					}
					mu.Unlock()
				}
			}
		}()
	}
	wg.Wait()
	st.elapsed = time.Since(start)
	return st
}

// startLatencies returns, per started job of the batch, the time from its
// dispatch's begin to its first Start.
func (p *benchPool) startLatencies(from int, st dispatchStats) latencies {
	p.log.mu.Lock()
	defer p.log.mu.Unlock()
	var out latencies
	for i, b := range st.begin {
		if at, ok := p.log.first[keyName(from+i)]; ok {
			out = append(out, at.Sub(b))
		}
	}
	return out
}
