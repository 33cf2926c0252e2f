package pool

import (
	"context"
	"runtime"
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	"github.com/shepherd-go/shepherd/internal/redistest"
)

// Micro-benchmarks of the hot paths. The end-to-end numbers (throughput,
// latency, failover, memory) come from `shepherd bench`; see
// BENCHMARKS.md.

// BenchmarkHeader encodes and decodes the header every event carries.
func BenchmarkHeader(b *testing.B) {
	h := header{nonce: newID(), gen: 3, replyTo: newID(), reqID: newID()}
	b.ReportAllocs()
	for b.Loop() {
		if _, _, err := parseHeader([]byte(h.String())); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkTableOwner is the routing decision: jump hash over a table of
// 16 workers with one dead slot.
func BenchmarkTableOwner(b *testing.B) {
	t := table{size: 17, slots: map[int]string{}}
	for i := range 17 {
		if i != 5 {
			t.slots[i] = newID()
		}
	}
	keys := make([]string, 1024)
	for i := range keys {
		keys[i] = "tenant-" + strconv.Itoa(i)
	}
	b.ReportAllocs()
	i := 0
	for b.Loop() {
		if t.owner(keys[i%len(keys)]) == "" {
			b.Fatal("no owner")
		}
		i++
	}
}

// BenchmarkTableSnapshot is what every dispatch pays to read its node's
// copy of the slot table (16 workers).
func BenchmarkTableSnapshot(b *testing.B) {
	ctx := context.Background()
	n, err := AddNode(ctx, srv.Client(), redistest.Name(b), WithClientOnly())
	if err != nil {
		b.Fatal(err)
	}
	defer n.Close(ctx)
	for i := range 16 {
		if _, err := n.slots.Set(ctx, strconv.Itoa(i), newID()); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportAllocs()
	for b.Loop() {
		if n.table().size != 16 {
			b.Fatal("wrong table")
		}
	}
}

// BenchmarkDispatchRoundTrip is one DispatchJob on an idle pool: admit
// and route, claim, Start, started and reply; sequential, so it measures
// latency.
func BenchmarkDispatchRoundTrip(b *testing.B) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	pool := redistest.Name(b)
	n, err := AddNode(ctx, srv.Client(), pool)
	if err != nil {
		b.Fatal(err)
	}
	if _, err := n.AddWorker(ctx, nopHandler{}); err != nil {
		b.Fatal(err)
	}
	payload := make([]byte, 64)
	b.ReportAllocs()
	i := 0
	for b.Loop() {
		if err := n.DispatchJob(ctx, "k"+strconv.Itoa(i), payload); err != nil {
			b.Fatal(err)
		}
		i++
	}
	b.StopTimer()
	if err := n.Shutdown(ctx); err != nil {
		b.Fatal(err)
	}
}

// BenchmarkDispatchParallel is DispatchJob from 64 goroutines at once on
// one node with 4 workers: the batched path (admissions, claims and
// started records in pipelines). ns/op is the inverse of throughput.
func BenchmarkDispatchParallel(b *testing.B) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	n, err := AddNode(ctx, srv.Client(), redistest.Name(b))
	if err != nil {
		b.Fatal(err)
	}
	for range 4 {
		if _, err := n.AddWorker(ctx, nopHandler{}); err != nil {
			b.Fatal(err)
		}
	}
	payload := make([]byte, 64)
	var seq atomic.Int64
	b.SetParallelism(max(1, 64/runtime.GOMAXPROCS(0)))
	b.ReportAllocs()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			if err := n.DispatchJob(ctx, "k"+strconv.FormatInt(seq.Add(1), 10), payload); err != nil {
				b.Error(err)
				return
			}
		}
	})
	b.StopTimer()
	if err := n.Shutdown(ctx); err != nil {
		b.Fatal(err)
	}
}

// nopHandler starts and stops at once.
type nopHandler struct{}

func (nopHandler) Start(context.Context, *Job) error  { return nil }
func (nopHandler) Stop(context.Context, string) error { return nil }
