package limit_test

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"time"

	"github.com/shepherd-go/shepherd/limit"
)

func ExampleNewSimple() {
	alg, _ := limit.NewFixed(2)
	lim, _ := limit.NewSimple(alg)
	ctx := context.Background()

	a, _ := lim.Acquire(ctx)
	b, _ := lim.Acquire(ctx)
	_, err := lim.Acquire(ctx)
	fmt.Println(errors.Is(err, limit.ErrLimitExceeded), lim.InFlight())

	a.Success() // the request completed: its RTT feeds the algorithm
	b.Dropped() // it timed out because of load: the limit backs off
	fmt.Println(lim.InFlight())
	// Output:
	// true 2
	// 0
}

func ExampleNewAIMD() {
	alg, _ := limit.NewAIMD(limit.WithAIMDInitial(10))
	fmt.Println(alg.Update(limit.Sample{RTT: 5 * time.Millisecond, InFlight: 10}))
	fmt.Println(alg.Update(limit.Sample{RTT: 5 * time.Millisecond, InFlight: 11, Dropped: true}))
	// Output:
	// 11
	// 9
}

func ExampleNewVegas() {
	alg, _ := limit.NewVegas()
	// The first sample is the no-load RTT; with no queue, the limit grows.
	alg.Update(limit.Sample{RTT: 10 * time.Millisecond, InFlight: 20})
	fmt.Println(alg.Update(limit.Sample{RTT: 10 * time.Millisecond, InFlight: 20}))
	// Twice the RTT means half the requests were queued: it shrinks.
	fmt.Println(alg.Update(limit.Sample{RTT: 20 * time.Millisecond, InFlight: 26}))
	// Output:
	// 26
	// 25
}

func ExampleNewWindowed() {
	vegas, _ := limit.NewVegas()
	// One aggregated sample (the p90 RTT) per window of about two RTTs.
	alg, _ := limit.NewWindowed(vegas, limit.WithWindowPercentile(0.9))
	lim, _ := limit.NewSimple(alg)
	fmt.Println(lim.Limit())
	// Output: 20
}

func ExampleNewPartitioned() {
	alg, _ := limit.NewFixed(10)
	lim, _ := limit.NewPartitioned(alg,
		limit.WithPartition("live", 0.9), limit.WithPartition("batch", 0.1))
	ctx := context.Background()

	// Batch may borrow capacity live does not use...
	var batch []limit.Token
	for range 10 {
		t, _ := lim.AcquirePartition(ctx, "batch")
		batch = append(batch, t)
	}
	// ...but once live is refused, the slots batch frees go to live.
	_, err := lim.AcquirePartition(ctx, "live")
	fmt.Println(err)
	batch[0].Success()
	_, err = lim.AcquirePartition(ctx, "batch")
	fmt.Println(err)
	_, err = lim.Acquire(limit.ContextWithPartition(ctx, "live"))
	fmt.Println(err)
	// Output:
	// limit: limit exceeded
	// limit: limit exceeded
	// <nil>
}

func ExampleNewBlocking() {
	alg, _ := limit.NewFixed(1)
	simple, _ := limit.NewSimple(alg)
	lim, _ := limit.NewBlocking(simple, limit.WithBlockingTimeout(10*time.Millisecond))
	ctx := context.Background()

	t, _ := lim.Acquire(ctx)
	_, err := lim.Acquire(ctx) // waits 10ms for a slot, then gives up
	fmt.Println(err)
	t.Success()
	// Output: limit: limit exceeded: no slot within 10ms
}

func ExampleNewAdaptiveExecutor() {
	alg, _ := limit.NewGradient2()
	simple, _ := limit.NewSimple(alg)
	exec, _ := limit.NewAdaptiveExecutor(simple)

	var done atomic.Int64
	for range 100 {
		// Submit blocks while as many tasks run as the limit allows.
		_ = exec.Submit(context.Background(), func(ctx context.Context) error {
			done.Add(1)
			return nil
		})
	}
	fmt.Println(exec.Shutdown(context.Background()), done.Load())
	// Output: <nil> 100
}

func ExampleMiddleware() {
	alg, _ := limit.NewFixed(1)
	lim, _ := limit.NewSimple(alg)
	mw, _ := limit.Middleware(lim, limit.WithRetryAfter(2*time.Second))

	hold, _ := lim.Acquire(context.Background()) // the only slot is taken
	h := mw(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {}))
	w := httptest.NewRecorder()
	h.ServeHTTP(w, httptest.NewRequest(http.MethodGet, "/", nil))
	fmt.Println(w.Code, w.Header().Get("Retry-After"))
	hold.Ignore()
	// Output: 429 2
}

func ExampleNewTransport() {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {}))
	defer srv.Close()
	alg, _ := limit.NewVegas()
	lim, _ := limit.NewSimple(alg)
	tr, _ := limit.NewTransport(lim, srv.Client().Transport)
	client := &http.Client{Transport: tr}

	resp, err := client.Get(srv.URL)
	if err != nil {
		fmt.Println(err)
		return
	}
	resp.Body.Close()
	fmt.Println(resp.StatusCode, lim.InFlight())
	// Output: 200 0
}
