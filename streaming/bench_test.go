package streaming

import (
	"fmt"
	"runtime"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
)

// The benchmarks report entries per second ("entries/s") so that they can
// be compared with redis-benchmark's requests per second for
// XADD s * f v.

// BenchmarkAdd runs Add from 50 goroutines, like redis-benchmark -c 50.
func BenchmarkAdd(b *testing.B) {
	// 50 connections, as redis-benchmark -c 50 opens.
	rdb := redis.NewClient(&redis.Options{Addr: srv.Addr(), PoolSize: 50})
	defer rdb.Close()
	s := newStream(b, rdb)
	payload := []byte("v")
	ctx := testCtx(b)
	b.SetParallelism(max(1, 50/runtime.GOMAXPROCS(0)))
	b.ResetTimer()
	start := time.Now()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			if _, err := s.Add(ctx, "e", payload); err != nil {
				b.Error(err)
				return
			}
		}
	})
	b.ReportMetric(float64(b.N)/time.Since(start).Seconds(), "entries/s")
}

// BenchmarkAddBatch adds batches from one goroutine: one round trip per
// batch.
func BenchmarkAddBatch(b *testing.B) {
	for _, size := range []int{16, 100} {
		b.Run(fmt.Sprint("batch=", size), func(b *testing.B) {
			s := newStream(b, nil)
			ctx := testCtx(b)
			entries := make([]Entry, size)
			for i := range entries {
				entries[i] = Entry{Event: "e", Payload: []byte("v")}
			}
			b.ResetTimer()
			start := time.Now()
			for i := 0; i < b.N; i++ {
				if _, err := s.AddBatch(ctx, entries); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(float64(b.N*size)/time.Since(start).Seconds(), "entries/s")
		})
	}
}

// BenchmarkSinkEndToEnd measures add → receive → ack through one sink:
// a producer adds in batches of 100 while the consumer acks in batches of
// what it has received.
func BenchmarkSinkEndToEnd(b *testing.B) {
	s := newStream(b, nil)
	ctx := testCtx(b)
	sink := newSink(b, s, "g", WithBufferSize(1000))
	const batch = 100
	entries := make([]Entry, batch)
	for i := range entries {
		entries[i] = Entry{Event: "e", Payload: []byte("v")}
	}
	b.ResetTimer()
	start := time.Now()
	produced := make(chan error, 1)
	go func() {
		for n := 0; n < b.N; n += batch {
			if _, err := s.AddBatch(ctx, entries[:min(batch, b.N-n)]); err != nil {
				produced <- err
				return
			}
		}
		produced <- nil
	}()
	acks := make([]*Event, 0, batch)
	for got := 0; got < b.N; {
		acks = append(acks[:0], <-sink.Subscribe())
	drain:
		for len(acks) < batch {
			select {
			case ev := <-sink.Subscribe():
				acks = append(acks, ev)
			default:
				break drain
			}
		}
		if err := sink.AckBatch(ctx, acks); err != nil {
			b.Fatal(err)
		}
		got += len(acks)
	}
	b.ReportMetric(float64(b.N)/time.Since(start).Seconds(), "entries/s")
	if err := <-produced; err != nil {
		b.Fatal(err)
	}
}
