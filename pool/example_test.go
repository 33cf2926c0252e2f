package pool_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/shepherd-go/shepherd/limit"
	"github.com/shepherd-go/shepherd/pool"
)

// printer is a JobHandler that prints what it is asked to do. A real
// handler starts a goroutine (or a subscription, a connection...) in Start
// and returns; Stop ends it.
type printer struct{}

func (printer) Start(ctx context.Context, job *pool.Job) error {
	if string(job.Payload) == "bad" {
		return errors.New("refusing a bad payload")
	}
	fmt.Println("start", job.Key, string(job.Payload))
	return nil
}

func (printer) Stop(ctx context.Context, key string) error {
	fmt.Println("stop", key)
	return nil
}

func (printer) HandleNotification(ctx context.Context, key string, payload []byte) error {
	fmt.Println("notify", key, string(payload))
	return nil
}

func Example() {
	ctx := context.Background()
	rdb := redis.NewClient(&redis.Options{Addr: pool.RedisAddr()}) // for instance "localhost:6379"
	defer rdb.Close()

	node, err := pool.AddNode(ctx, rdb, "example-pool")
	if err != nil {
		panic(err)
	}
	if _, err := node.AddWorker(ctx, printer{}); err != nil {
		panic(err)
	}
	if err := node.DispatchJob(ctx, "tenant-42", []byte("hello")); err != nil {
		panic(err)
	}
	if err := node.DispatchJob(ctx, "tenant-42", nil); errors.Is(err, pool.ErrJobExists) {
		fmt.Println("tenant-42 already runs")
	}
	var startErr *pool.StartError
	if err := node.DispatchJob(ctx, "tenant-7", []byte("bad")); errors.As(err, &startErr) {
		fmt.Println("start failed:", startErr.Msg)
	}
	if err := node.NotifyWorker(ctx, "tenant-42", []byte("reload")); err != nil {
		panic(err)
	}
	if err := node.StopJob(ctx, "tenant-42"); err != nil {
		panic(err)
	}
	// Shutdown stops every job on every node and deletes the pool's keys.
	if err := node.Shutdown(ctx); err != nil {
		panic(err)
	}
	// Output:
	// start tenant-42 hello
	// tenant-42 already runs
	// start failed: refusing a bad payload
	// notify tenant-42 reload
	// stop tenant-42
}

// Stats lists the workers with their slots, health and jobs.
func ExampleNode_Stats_workers() {
	ctx := context.Background()
	rdb := redis.NewClient(&redis.Options{Addr: pool.RedisAddr()})
	defer rdb.Close()
	node, err := pool.AddNode(ctx, rdb, "example-workers")
	if err != nil {
		panic(err)
	}
	defer node.Shutdown(ctx)
	for i := 0; i < 2; i++ {
		if _, err := node.AddWorker(ctx, quiet{}); err != nil {
			panic(err)
		}
	}
	for _, key := range []string{"a", "b", "c", "d"} {
		if err := node.DispatchJob(ctx, key, nil); err != nil {
			panic(err)
		}
	}
	st, err := node.Stats(ctx)
	if err != nil {
		panic(err)
	}
	total := 0
	for _, w := range st.Workers {
		total += len(w.Keys)
		fmt.Println("slot", w.Slot, "healthy", w.Healthy)
	}
	fmt.Println("jobs", total)
	// Output:
	// slot 0 healthy true
	// slot 1 healthy true
	// jobs 4
}

type quiet struct{}

func (quiet) Start(context.Context, *pool.Job) error { return nil }
func (quiet) Stop(context.Context, string) error     { return nil }

// counter is a JobHandler that counts the jobs it runs.
type counter struct {
	mu      sync.Mutex
	running map[string]bool
}

func (c *counter) Start(_ context.Context, job *pool.Job) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.running[job.Key] = true
	return nil
}

func (c *counter) Stop(_ context.Context, key string) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	delete(c.running, key)
	return nil
}

func (c *counter) len() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.running)
}

// RemoveWorker hands the worker's jobs to the others: Stop runs on the
// leaving worker before each job starts elsewhere, and nothing is lost.
func ExampleNode_RemoveWorker() {
	ctx := context.Background()
	rdb := redis.NewClient(&redis.Options{Addr: pool.RedisAddr()})
	defer rdb.Close()
	node, err := pool.AddNode(ctx, rdb, "example-remove")
	if err != nil {
		panic(err)
	}
	defer node.Shutdown(ctx)
	a, b := &counter{running: map[string]bool{}}, &counter{running: map[string]bool{}}
	wa, err := node.AddWorker(ctx, a)
	if err != nil {
		panic(err)
	}
	if _, err := node.AddWorker(ctx, b); err != nil {
		panic(err)
	}
	for i := 0; i < 10; i++ {
		if err := node.DispatchJob(ctx, fmt.Sprintf("job-%d", i), nil); err != nil {
			panic(err)
		}
	}
	if err := node.RemoveWorker(ctx, wa); err != nil {
		panic(err)
	}
	// The handed-over jobs start on b, within moments.
	for deadline := time.Now().Add(10 * time.Second); b.len() < 10 && time.Now().Before(deadline); {
		time.Sleep(10 * time.Millisecond)
	}
	keys, err := node.JobKeys(ctx)
	if err != nil {
		panic(err)
	}
	fmt.Println("a runs", a.len(), "b runs", b.len(), "pool has", len(keys))
	// Output: a runs 0 b runs 10 pool has 10
}

// Close takes a node out of the pool; its jobs wait for, or move to,
// workers on other nodes. Done tells a process when to exit.
func ExampleNode_Close() {
	ctx := context.Background()
	rdb := redis.NewClient(&redis.Options{Addr: pool.RedisAddr()})
	defer rdb.Close()
	node, err := pool.AddNode(ctx, rdb, "example-close")
	if err != nil {
		panic(err)
	}
	if _, err := node.AddWorker(ctx, quiet{}); err != nil {
		panic(err)
	}
	if err := node.DispatchJob(ctx, "tenant-1", nil); err != nil {
		panic(err)
	}
	if err := node.Close(ctx); err != nil {
		panic(err)
	}
	<-node.Done()
	fmt.Println(errors.Is(node.DispatchJob(ctx, "tenant-2", nil), pool.ErrNodeClosed))

	// The job waits in the pool for the next worker.
	other, err := pool.AddNode(ctx, rdb, "example-close")
	if err != nil {
		panic(err)
	}
	defer other.Shutdown(ctx)
	keys, err := other.JobKeys(ctx)
	if err != nil {
		panic(err)
	}
	fmt.Println(keys)
	// Output:
	// true
	// [tenant-1]
}

// WithDispatchLimit makes producers wait for a permit instead of calling
// a full or slow pool again and again; a call that gets none within the
// wait fails with limit.ErrLimitExceeded, having sent nothing.
func ExampleWithDispatchLimit() {
	ctx := context.Background()
	rdb := redis.NewClient(&redis.Options{Addr: pool.RedisAddr()})
	defer rdb.Close()

	node, err := pool.AddNode(ctx, rdb, "example-dispatch-limit", pool.WithDispatchLimit(nil, time.Second))
	if err != nil {
		panic(err)
	}
	defer node.Shutdown(ctx)
	if _, err := node.AddWorker(ctx, quiet{}); err != nil {
		panic(err)
	}
	var wg sync.WaitGroup
	for i := range 40 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			err := node.DispatchJob(ctx, fmt.Sprintf("feed-%d", i), nil)
			if errors.Is(err, limit.ErrLimitExceeded) {
				return // back off: try later
			}
			if err != nil {
				panic(err)
			}
		}()
	}
	wg.Wait()
	dl := node.DispatchLimit()
	fmt.Println(dl.Limit >= 1, dl.InFlight, dl.Waiting)
	// Output: true 0 0
}
