package queue_test

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/shepherd-go/shepherd/limit"
	"github.com/shepherd-go/shepherd/queue"
)

func Example() {
	ctx := context.Background()
	rdb := redis.NewClient(&redis.Options{Addr: queue.RedisAddr()}) // for instance "localhost:6379"
	defer rdb.Close()

	q, err := queue.Open(ctx, rdb, "example-thumbnails")
	if err != nil {
		panic(err)
	}
	defer q.Close(ctx)

	// Serve: two workers, each running one task at a time.
	if _, err := q.Serve(func(ctx context.Context, t *queue.Task) ([]byte, error) {
		return []byte(strings.ToUpper(string(t.Payload))), nil
	}, queue.WithWorkers(2)); err != nil {
		panic(err)
	}

	f, err := q.Submit(ctx, []byte("cat.png"))
	if err != nil {
		panic(err)
	}
	res, err := f.Wait(ctx)
	if err != nil {
		panic(err)
	}
	fmt.Println(string(res))
	// Output: CAT.PNG
}

// A worker that owns a resource: each of the two workers opens its own
// (a connection, a browser...) and keeps it across tasks.
func ExampleServeWith() {
	ctx := context.Background()
	rdb := redis.NewClient(&redis.Options{Addr: queue.RedisAddr()})
	defer rdb.Close()
	q, err := queue.Open(ctx, rdb, "example-resources")
	if err != nil {
		panic(err)
	}
	defer q.Close(ctx)

	type conn struct{ worker int }
	res := queue.Resource[*conn]{
		Open:  func(ctx context.Context, worker int) (*conn, error) { return &conn{worker: worker}, nil },
		Close: func(c *conn) {},
	}
	s, err := queue.ServeWith(q, res, func(ctx context.Context, c *conn, t *queue.Task) ([]byte, error) {
		return []byte(fmt.Sprintf("%s on a worker's own connection", t.Payload)), nil
	}, queue.WithWorkers(2))
	if err != nil {
		panic(err)
	}
	defer s.Stop(ctx)

	f, err := q.Submit(ctx, []byte("query"))
	if err != nil {
		panic(err)
	}
	out, err := f.Wait(ctx)
	fmt.Println(string(out), err)
	// Output: query on a worker's own connection <nil>
}

// Retries, RetryLater, Permanent errors and dead letters.
func ExampleQueue_DeadLetters() {
	ctx := context.Background()
	rdb := redis.NewClient(&redis.Options{Addr: queue.RedisAddr()})
	defer rdb.Close()
	q, err := queue.Open(ctx, rdb, "example-dead")
	if err != nil {
		panic(err)
	}
	defer q.Close(ctx)
	if _, err := q.Serve(func(ctx context.Context, t *queue.Task) ([]byte, error) {
		switch string(t.Payload) {
		case "bad":
			return nil, queue.Permanent(errors.New("malformed input"))
		case "flaky":
			if t.Attempt < 3 {
				return nil, fmt.Errorf("timeout talking to the API (attempt %d)", t.Attempt)
			}
		}
		return []byte("ok"), nil
	}, queue.WithWorkers(1), queue.WithBackoff(time.Millisecond, 10*time.Millisecond)); err != nil {
		panic(err)
	}

	flaky, _ := q.Submit(ctx, []byte("flaky"), queue.WithMaxAttempts(5))
	res, err := flaky.Wait(ctx)
	fmt.Println(string(res), err)

	bad, _ := q.Submit(ctx, []byte("bad"), queue.WithTaskID("order-17"))
	_, err = bad.Wait(ctx)
	var te *queue.TaskError
	if errors.As(err, &te) && errors.Is(err, queue.ErrFailed) {
		fmt.Println("failed after", len(te.Attempts), "attempt:", te.Attempts[0].Err)
	}
	dead, _ := q.DeadLetters(ctx, 0, 10)
	for _, d := range dead {
		fmt.Println("dead letter:", d.ID, string(d.Payload))
	}
	_, _ = q.PurgeDead(ctx)
	// Output:
	// ok <nil>
	// failed after 1 attempt: malformed input
	// dead letter: order-17 bad
}

// Delayed tasks, and reading an outcome by id from any process.
func ExampleQueue_Result() {
	ctx := context.Background()
	rdb := redis.NewClient(&redis.Options{Addr: queue.RedisAddr()})
	defer rdb.Close()
	q, err := queue.Open(ctx, rdb, "example-result")
	if err != nil {
		panic(err)
	}
	defer q.Close(ctx)
	if _, err := q.Serve(func(ctx context.Context, t *queue.Task) ([]byte, error) {
		return []byte("sent"), nil
	}, queue.WithWorkers(1)); err != nil {
		panic(err)
	}
	f, err := q.Submit(ctx, []byte("reminder"), queue.WithDelay(50*time.Millisecond), queue.WithTaskID("email-1"))
	if err != nil {
		panic(err)
	}
	_, err = q.Result(ctx, "email-1")
	fmt.Println(errors.Is(err, queue.ErrNotFinished))
	<-f.Done()
	res, err := q.Result(ctx, "email-1")
	fmt.Println(string(res), err)
	// Output:
	// true
	// sent <nil>
}

// An operator's view, without joining the queue: depth by state, the
// tasks waiting, and a cancellation.
func ExampleClient() {
	ctx := context.Background()
	rdb := redis.NewClient(&redis.Options{Addr: queue.RedisAddr()})
	defer rdb.Close()
	q, err := queue.Open(ctx, rdb, "example-client")
	if err != nil {
		panic(err)
	}
	defer q.Close(ctx)
	for _, id := range []string{"a", "b"} {
		if _, err := q.Submit(ctx, nil, queue.WithTaskID(id), queue.WithDelay(time.Hour)); err != nil {
			panic(err)
		}
	}

	c, err := queue.NewClient(rdb, "example-client") // registers no process
	if err != nil {
		panic(err)
	}
	ok, _ := c.Exists(ctx)
	st, _ := c.Stats(ctx)
	fmt.Println(ok, st.Delayed, "delayed,", st.Workers, "workers")
	delayed, _ := c.Tasks(ctx, queue.StateDelayed, 0, 10)
	for _, t := range delayed {
		fmt.Println(t.ID, t.State)
	}
	if err := c.Cancel(ctx, "a"); err != nil {
		panic(err)
	}
	_, err = c.Result(ctx, "a")
	fmt.Println(errors.Is(err, queue.ErrCancelled))
	// Output:
	// true 2 delayed, 0 workers
	// a delayed
	// b delayed
	// true
}

// A fixed number of tasks taken ahead: each worker has the next task at
// hand when it ends one (8 taken ahead for the process, however long the
// tasks), and the process talks to Redis in bigger batches. Without the
// option, a process takes short tasks ahead on its own while the queue
// has a backlog; WithPrefetch(0) takes nothing ahead.
func ExampleWithPrefetch() {
	ctx := context.Background()
	rdb := redis.NewClient(&redis.Options{Addr: queue.RedisAddr()})
	defer rdb.Close()
	q, err := queue.Open(ctx, rdb, "example-prefetch")
	if err != nil {
		panic(err)
	}
	defer q.Close(ctx)

	s, err := q.Serve(func(ctx context.Context, t *queue.Task) ([]byte, error) {
		return t.Payload, nil
	}, queue.WithWorkers(4), queue.WithPrefetch(8))
	if err != nil {
		panic(err)
	}
	defer s.Stop(ctx) // tasks taken ahead and not started go back

	var fs []*queue.Future
	for i := range 100 {
		f, err := q.Submit(ctx, []byte(fmt.Sprint(i)))
		if err != nil {
			panic(err)
		}
		fs = append(fs, f)
	}
	sum := 0
	for _, f := range fs {
		res, err := f.Wait(ctx)
		if err != nil {
			panic(err)
		}
		var n int
		fmt.Sscan(string(res), &n)
		sum += n
	}
	fmt.Println(sum)
	// Output: 4950
}

// Tenants: each gets a capacity, and takes turns with the others.
func ExampleClient_SetTenant() {
	ctx := context.Background()
	rdb := redis.NewClient(&redis.Options{Addr: queue.RedisAddr()})
	defer rdb.Close()
	q, err := queue.Open(ctx, rdb, "example-tenants")
	if err != nil {
		panic(err)
	}
	defer q.Close(ctx)

	if err := q.SetTenant(ctx, "acme", 2); err != nil { // at most 2 of acme's tasks at once
		panic(err)
	}
	_, err = q.Submit(ctx, []byte("x"), queue.WithTenant("made-up"))
	fmt.Println(errors.Is(err, queue.ErrUnknownTenant))

	s, err := q.Serve(func(ctx context.Context, t *queue.Task) ([]byte, error) {
		return t.Payload, nil
	}, queue.WithWorkers(4))
	if err != nil {
		panic(err)
	}
	defer s.Stop(ctx)
	f, err := q.Submit(ctx, []byte("report"), queue.WithTenant("acme"))
	if err != nil {
		panic(err)
	}
	res, err := f.Wait(ctx)
	fmt.Println(string(res), err)
	tenants, err := q.Tenants(ctx)
	if err != nil {
		panic(err)
	}
	for _, t := range tenants {
		fmt.Printf("%s: capacity %d, load %d\n", t.ID, t.Capacity, t.Load)
	}
	// Output:
	// true
	// report <nil>
	// acme: capacity 2, load 0
}

// Acquire takes a tenant's capacity for work outside the queue.
func ExampleQueue_Acquire() {
	ctx := context.Background()
	rdb := redis.NewClient(&redis.Options{Addr: queue.RedisAddr()})
	defer rdb.Close()
	q, err := queue.Open(ctx, rdb, "example-acquire", queue.WithAcquireWait(10*time.Millisecond))
	if err != nil {
		panic(err)
	}
	defer q.Close(ctx)
	if err := q.SetTenant(ctx, "acme", 1); err != nil {
		panic(err)
	}

	slot, err := q.Acquire(ctx, "acme")
	if err != nil {
		panic(err)
	}
	_, err = q.Acquire(ctx, "acme") // the only slot is taken
	fmt.Println(errors.Is(err, queue.ErrTenantBusy))
	if err := slot.Release(ctx); err != nil {
		panic(err)
	}
	slot, err = q.Acquire(ctx, "acme")
	fmt.Println(err)
	_ = slot.Release(ctx)
	// Output:
	// true
	// <nil>
}

// Middleware guards an HTTP handler with the request's tenant's capacity.
func ExampleQueue_Middleware() {
	ctx := context.Background()
	rdb := redis.NewClient(&redis.Options{Addr: queue.RedisAddr()})
	defer rdb.Close()
	q, err := queue.Open(ctx, rdb, "example-middleware")
	if err != nil {
		panic(err)
	}
	defer q.Close(ctx)
	if err := q.SetTenant(ctx, "acme", 10); err != nil {
		panic(err)
	}
	h := q.Middleware(func(r *http.Request) string { return r.Header.Get("X-Tenant") },
		http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { fmt.Fprint(w, "rendered") }))

	for _, tenant := range []string{"acme", "made-up"} {
		req := httptest.NewRequest(http.MethodGet, "/render", nil)
		req.Header.Set("X-Tenant", tenant)
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, req)
		fmt.Println(tenant, rec.Code)
	}
	// Output:
	// acme 200
	// made-up 403
}

// The seed's controllers: a document controller drains its queue and
// feeds two download queues that serve until told; when it is done, they
// are switched to drain, and the program ends when all three are done.
func ExampleServer_SetMode() {
	ctx := context.Background()
	rdb := redis.NewClient(&redis.Options{Addr: queue.RedisAddr()})
	defer rdb.Close()
	open := func(name string) *queue.Queue {
		q, err := queue.Open(ctx, rdb, name)
		if err != nil {
			panic(err)
		}
		return q
	}
	docs, images, fonts := open("example-docs"), open("example-images"), open("example-fonts")
	defer docs.Close(ctx)
	defer images.Close(ctx)
	defer fonts.Close(ctx)

	fetch := func(ctx context.Context, t *queue.Task) ([]byte, error) { return nil, nil }
	imageSrv, err := images.Serve(fetch, queue.WithWorkers(2))
	if err != nil {
		panic(err)
	}
	fontSrv, err := fonts.Serve(fetch, queue.WithWorkers(1))
	if err != nil {
		panic(err)
	}
	// Each document needs two images and a font.
	for i := range 5 {
		if _, err := docs.Submit(ctx, []byte(fmt.Sprint("doc", i))); err != nil {
			panic(err)
		}
	}
	docSrv, err := docs.Serve(func(ctx context.Context, t *queue.Task) ([]byte, error) {
		for _, q := range []*queue.Queue{images, images, fonts} {
			if _, err := q.Submit(ctx, t.Payload); err != nil {
				return nil, err
			}
		}
		return nil, nil
	}, queue.WithWorkers(2), queue.WithMode(queue.ModeDrain))
	if err != nil {
		panic(err)
	}

	<-docSrv.Done() // the documents are done: the downloads finish what they have
	for _, s := range []*queue.Server{imageSrv, fontSrv} {
		if err := s.SetMode(queue.ModeDrain); err != nil {
			panic(err)
		}
	}
	<-imageSrv.Done()
	<-fontSrv.Done()
	for _, q := range []*queue.Queue{docs, images, fonts} {
		st, err := q.Stats(ctx)
		if err != nil {
			panic(err)
		}
		fmt.Println(q.Name(), "left:", st.Available+st.InFlight)
	}
	// Output:
	// example-docs left: 0
	// example-images left: 0
	// example-fonts left: 0
}

// An operator drains a queue's serving processes from outside them (a
// deploy): each runs what it can take now, then stops by itself.
// Stats shows each process's mode meanwhile.
func ExampleClient_Drain() {
	ctx := context.Background()
	rdb := redis.NewClient(&redis.Options{Addr: queue.RedisAddr()})
	defer rdb.Close()
	q, err := queue.Open(ctx, rdb, "example-drain")
	if err != nil {
		panic(err)
	}
	defer q.Close(ctx)
	release := make(chan struct{})
	srv, err := q.Serve(func(ctx context.Context, t *queue.Task) ([]byte, error) {
		<-release // a long task
		return nil, nil
	}, queue.WithWorkers(1))
	if err != nil {
		panic(err)
	}
	if _, err := q.Submit(ctx, []byte("long")); err != nil {
		panic(err)
	}
	c, err := queue.NewClient(rdb, "example-drain") // in the operator's tool
	if err != nil {
		panic(err)
	}
	mode := func() string { // as of the process's last keep-alive, sent when the mode changes
		st, err := c.Stats(ctx)
		if err != nil || len(st.Processes) == 0 {
			return ""
		}
		return st.Processes[0].Mode
	}
	for mode() != "serve" { // Serve announces the server in the background
		time.Sleep(10 * time.Millisecond)
	}

	n, err := c.Drain(ctx)
	if err != nil {
		panic(err)
	}
	fmt.Println("asked", n, "process(es)")
	for mode() != "drain" {
		time.Sleep(10 * time.Millisecond)
	}
	fmt.Println(srv.Mode())
	close(release)
	<-srv.Done()
	fmt.Println("drained")

	other, _ := queue.NewClient(rdb, "example-no-such-queue")
	_, err = other.Drain(ctx)
	fmt.Println(errors.Is(err, queue.ErrQueueNotFound))
	// Output:
	// asked 1 process(es)
	// drain
	// drained
	// true
}

// The process runs as many tasks at once as its downstream bears:
// Gradient2 learns it from the handlers' times, between 2 and 8.
func ExampleWithConcurrencyLimit() {
	ctx := context.Background()
	rdb := redis.NewClient(&redis.Options{Addr: queue.RedisAddr()})
	defer rdb.Close()
	q, err := queue.Open(ctx, rdb, "example-limit")
	if err != nil {
		panic(err)
	}
	defer q.Close(ctx)
	s, err := q.Serve(func(ctx context.Context, t *queue.Task) ([]byte, error) {
		return t.Payload, nil // call the downstream here
	}, queue.WithWorkers(8), queue.WithConcurrencyLimit(nil, 2))
	if err != nil {
		panic(err)
	}
	defer s.Stop(ctx)
	f, err := q.Submit(ctx, []byte("ping"))
	if err != nil {
		panic(err)
	}
	res, err := f.Wait(ctx)
	fmt.Println(string(res), err, s.Limit() >= 2 && s.Limit() <= 8)
	// Output: ping <nil> true
}

// Two queues share one concurrency limit against the same downstream:
// live tasks are guaranteed 90% of it, batch tasks 10%, and either may
// borrow what the other leaves idle.
func ExampleNewLimit() {
	ctx := context.Background()
	rdb := redis.NewClient(&redis.Options{Addr: queue.RedisAddr()})
	defer rdb.Close()
	lim, err := queue.NewLimit(nil, limit.WithPartition("live", 0.9), limit.WithPartition("batch", 0.1))
	if err != nil {
		panic(err)
	}
	call := func(ctx context.Context, t *queue.Task) ([]byte, error) {
		return t.Payload, nil // call the downstream here
	}
	var futures []*queue.Future
	for _, class := range []string{"live", "batch"} {
		q, err := queue.Open(ctx, rdb, "example-shared-"+class)
		if err != nil {
			panic(err)
		}
		defer q.Close(ctx)
		if _, err := q.Serve(call, queue.WithWorkers(16), queue.WithLimit(lim, class)); err != nil {
			panic(err)
		}
		f, err := q.Submit(ctx, []byte(class))
		if err != nil {
			panic(err)
		}
		futures = append(futures, f)
	}
	for _, f := range futures {
		res, err := f.Wait(ctx)
		fmt.Println(string(res), err)
	}
	for _, p := range lim.Partitions() {
		fmt.Println(p.Name, p.Share)
	}
	// Output:
	// live <nil>
	// batch <nil>
	// batch 0.1
	// live 0.9
}
