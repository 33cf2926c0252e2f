package main

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/shepherd-go/shepherd/pool"
	"github.com/shepherd-go/shepherd/queue"
)

// jobs is the demo pool's handler: every job runs until stopped.
type jobs struct{}

func (jobs) Start(ctx context.Context, job *pool.Job) error { return nil }
func (jobs) Stop(ctx context.Context, key string) error     { return nil }

// demo fills the pool "ingest" (two named nodes, six workers, 23 jobs,
// more dispatched over time) and the queue "thumbnails" (a named serving
// process, a submit-only client, two tenants; tasks done, retrying, dead
// from Permanent, delayed and in flight, submitted over time), and keeps
// them going until the returned func is called.
func demo(ctx context.Context, rdb redis.UniversalClient) (func(), error) {
	var closers []func()
	stop := func() {
		for i := len(closers) - 1; i >= 0; i-- {
			closers[i]()
		}
	}
	fail := func(err error) (func(), error) { stop(); return nil, err }

	var nodes []*pool.Node
	for i, workers := range []int{4, 2} {
		n, err := pool.AddNode(ctx, rdb, "ingest", pool.WithName(fmt.Sprintf("ingest-%d", i+1)))
		if err != nil {
			return fail(err)
		}
		closers = append(closers, func() { _ = n.Close(context.Background()) })
		for range workers {
			if _, err := n.AddWorker(ctx, jobs{}); err != nil {
				return fail(err)
			}
		}
		nodes = append(nodes, n)
	}
	for i := range 23 {
		if err := nodes[0].DispatchJob(ctx, fmt.Sprintf("tenant-%02d", i), []byte(`{"source":"s3://ingest/tenant"}`)); err != nil {
			return fail(err)
		}
	}
	// A schedule (one job per connected device) and a cluster ticker, for
	// the pool page's tables.
	for _, n := range nodes {
		if err := n.Schedule(ctx, devices{}, 30*time.Second); err != nil {
			return fail(err)
		}
		if _, err := n.NewTicker(ctx, "hourly-report", time.Hour); err != nil {
			return fail(err)
		}
	}

	q, err := queue.Open(ctx, rdb, "thumbnails", queue.WithName("thumbs-a"))
	if err != nil {
		return fail(err)
	}
	closers = append(closers, func() { _ = q.Close(context.Background()) })
	api, err := queue.Open(ctx, rdb, "thumbnails", queue.WithName("api"))
	if err != nil {
		return fail(err)
	}
	closers = append(closers, func() { _ = api.Close(context.Background()) })
	for ten, capacity := range map[string]int{"acme": 4, "globex": 2} {
		if err := q.SetTenant(ctx, ten, capacity); err != nil {
			return fail(err)
		}
	}
	release := make(chan struct{})
	var once sync.Once
	closers = append(closers, func() { once.Do(func() { close(release) }) })
	_, err = q.Serve(func(ctx context.Context, t *queue.Task) ([]byte, error) {
		switch string(t.Payload) {
		case "corrupt":
			return nil, queue.Permanent(errors.New("image is not a JPEG: unexpected EOF at byte 1832"))
		case "slow":
			select {
			case <-release:
			case <-ctx.Done():
			}
			return nil, nil
		case "flaky":
			return nil, errors.New("storage: 503 Service Unavailable")
		}
		time.Sleep(time.Duration(2+rand.IntN(30)) * time.Millisecond)
		return []byte(`{"width":320,"height":240}`), nil
	}, queue.WithWorkers(6), queue.WithBackoff(time.Minute, time.Hour))
	if err != nil {
		return fail(err)
	}
	submit := func(payload string, opts ...queue.SubmitOption) error {
		_, err := api.Submit(ctx, []byte(payload), opts...)
		return err
	}
	for _, s := range []struct {
		id, payload, tenant string
		delay               time.Duration
	}{
		{"invoice-17", "corrupt", "acme", 0},
		{"invoice-18", "corrupt", "globex", 0},
		{"render-1", "slow", "acme", 0},
		{"render-2", "slow", "globex", 0},
		{"sync-7", "flaky", "acme", 0},
		{"nightly-1", "ok", "acme", time.Hour},
		{"nightly-2", "ok", "globex", 2 * time.Hour},
	} {
		opts := []queue.SubmitOption{queue.WithTaskID(s.id), queue.WithTenant(s.tenant), queue.WithMaxAttempts(5)}
		if s.delay > 0 {
			opts = append(opts, queue.WithDelay(s.delay))
		}
		if err := submit(s.payload, opts...); err != nil {
			return fail(err)
		}
	}
	// A steady trickle of work, with a burst now and then, for the charts.
	feed, cancelFeed := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		tick := time.NewTicker(100 * time.Millisecond)
		defer tick.Stop()
		for i := 0; ; i++ {
			select {
			case <-feed.Done():
				return
			case <-tick.C:
			}
			n := 2 + rand.IntN(4)
			if i%100 < 10 {
				n += 20
			}
			for j := range n {
				ten := "acme"
				if j%3 == 0 {
					ten = "globex"
				}
				payload := "ok"
				if rand.IntN(200) == 0 {
					payload = "corrupt"
				}
				_ = submit(payload, queue.WithTenant(ten))
			}
			if i%50 == 0 {
				_ = nodes[1].DispatchJob(feed, fmt.Sprintf("late-%03d", i/50), nil)
			}
		}
	}()
	closers = append(closers, func() { cancelFeed(); wg.Wait() })
	return stop, nil
}

// devices plans a job per connected device for the demo's schedule.
type devices struct{}

func (devices) Name() string { return "devices" }

func (devices) Plan(context.Context) (*pool.JobPlan, error) {
	plan := &pool.JobPlan{StopOthers: true}
	for i := range 12 {
		plan.Jobs = append(plan.Jobs, pool.PlannedJob{Key: fmt.Sprintf("device-%02d", i), Payload: []byte(`{"firmware":"2.4"}`)})
	}
	return plan, nil
}
