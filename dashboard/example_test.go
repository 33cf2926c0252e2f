package dashboard_test

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"slices"

	"github.com/redis/go-redis/v9"

	"github.com/shepherd-go/shepherd/dashboard"
	"github.com/shepherd-go/shepherd/pool"
)

// The dashboard mounted under /ops/shepherd/ of a server's own mux, next
// to the server's other routes.
func ExampleNew() {
	rdb := redis.NewClient(&redis.Options{Addr: dashboard.RedisAddr()})
	defer rdb.Close()
	dash, err := dashboard.New(rdb, dashboard.WithPrefix("/ops/shepherd"), dashboard.WithReadOnly(true))
	if err != nil {
		panic(err)
	}
	defer dash.Close()

	mux := http.NewServeMux()
	mux.Handle("/ops/shepherd/", dash)
	mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, r *http.Request) { fmt.Fprint(w, "ok") })
	srv := httptest.NewServer(mux) // or http.ListenAndServe("127.0.0.1:8080", mux)
	defer srv.Close()

	for _, path := range []string{"/healthz", "/ops/shepherd/", "/ops/shepherd/static/style.css", "/ops/shepherd/pool/no-such-pool"} {
		resp, err := http.Get(srv.URL + path)
		if err != nil {
			panic(err)
		}
		resp.Body.Close()
		fmt.Println(resp.StatusCode, path)
	}
	// Output:
	// 200 /healthz
	// 200 /ops/shepherd/
	// 200 /ops/shepherd/static/style.css
	// 404 /ops/shepherd/pool/no-such-pool
}

// List reads what the overview shows, as data.
func ExampleList() {
	ctx := context.Background()
	rdb := redis.NewClient(&redis.Options{Addr: dashboard.RedisAddr()})
	defer rdb.Close()
	node, err := pool.AddNode(ctx, rdb, "example-list")
	if err != nil {
		panic(err)
	}
	defer node.Shutdown(ctx)
	if _, err := node.AddWorker(ctx, idle{}); err != nil {
		panic(err)
	}
	for _, key := range []string{"tenant-1", "tenant-2"} {
		if err := node.DispatchJob(ctx, key, nil); err != nil {
			panic(err)
		}
	}

	l, err := dashboard.List(ctx, rdb)
	if err != nil {
		panic(err)
	}
	for _, p := range l.Pools {
		if p.Name == "example-list" {
			fmt.Printf("%s: %d jobs, %d/%d workers live, %s\n", p.Name, p.Jobs, p.WorkersHealthy, p.Workers, p.Health)
		}
	}
	// Output:
	// example-list: 2 jobs, 1/1 workers live, ok
}

// idle is a JobHandler whose jobs do nothing.
type idle struct{}

func (idle) Start(ctx context.Context, job *pool.Job) error { return nil }
func (idle) Stop(ctx context.Context, key string) error     { return nil }

// Names lists the pools and queues a Redis holds, by name only.
func ExampleNames() {
	ctx := context.Background()
	rdb := redis.NewClient(&redis.Options{Addr: dashboard.RedisAddr()})
	defer rdb.Close()
	node, err := pool.AddNode(ctx, rdb, "example-names")
	if err != nil {
		panic(err)
	}
	defer node.Shutdown(ctx)

	pools, _, err := dashboard.Names(ctx, rdb)
	if err != nil {
		panic(err)
	}
	fmt.Println(slices.Contains(pools, "example-names"))
	// Output: true
}
