package rmap

import (
	"context"
	"fmt"
	"slices"
	"strconv"
	"testing"
	"time"

	"github.com/shepherd-go/shepherd/internal/redistest"
	"github.com/stretchr/testify/require"
)

// BenchmarkSet measures sequential Sets from one replica, alone and while
// two other replicas follow the map, over loopback.
func BenchmarkSet(b *testing.B) {
	for _, followers := range []int{0, 2} {
		b.Run(fmt.Sprint("followers=", followers), func(b *testing.B) {
			ctx := context.Background()
			name := redistest.Name(b)
			m := join(b, srv.NewClient(), name)
			for range followers {
				join(b, srv.NewClient(), name)
			}
			b.ReportAllocs()
			start := time.Now()
			for i := 0; b.Loop(); i++ {
				if _, err := m.Set(ctx, strconv.Itoa(i%1000), "value"); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(float64(b.N)/time.Since(start).Seconds(), "ops/s")
		})
	}
}

// BenchmarkSetParallel measures Sets from concurrent goroutines on one
// replica (GOMAXPROCS goroutines).
func BenchmarkSetParallel(b *testing.B) {
	ctx := context.Background()
	m := join(b, srv.NewClient(), redistest.Name(b))
	b.ResetTimer()
	start := time.Now()
	b.RunParallel(func(pb *testing.PB) {
		i := 0
		for pb.Next() {
			i++
			if _, err := m.Set(ctx, strconv.Itoa(i%1000), "value"); err != nil {
				b.Error(err)
				return
			}
		}
	})
	b.ReportMetric(float64(b.N)/time.Since(start).Seconds(), "ops/s")
}

// BenchmarkRawHSet is the baseline for BenchmarkSet: a plain HSET round
// trip on the same kind of client, with no script, revision, publish or
// local copy.
func BenchmarkRawHSet(b *testing.B) {
	ctx := context.Background()
	rdb := srv.NewClient()
	key := redistest.Name(b)
	start := time.Now()
	for i := 0; b.Loop(); i++ {
		if err := rdb.HSet(ctx, key, strconv.Itoa(i%1000), "value").Err(); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(b.N)/time.Since(start).Seconds(), "ops/s")
}

// BenchmarkGet measures local reads of a 1000-entry map, from one
// goroutine and from GOMAXPROCS goroutines (read-lock contention).
func BenchmarkGet(b *testing.B) {
	ctx := context.Background()
	m := join(b, srv.NewClient(), redistest.Name(b))
	for i := range 1000 {
		_, err := m.Set(ctx, strconv.Itoa(i), "value")
		require.NoError(b, err)
	}
	keys := make([]string, 1000)
	for i := range keys {
		keys[i] = strconv.Itoa(i)
	}
	b.ReportAllocs()
	b.Run("serial", func(b *testing.B) {
		for i := 0; b.Loop(); i++ {
			if _, ok := m.Get(keys[i%1000]); !ok {
				b.Fatal("missing")
			}
		}
	})
	b.Run("parallel", func(b *testing.B) {
		b.RunParallel(func(pb *testing.PB) {
			i := 0
			for pb.Next() {
				if _, ok := m.Get(keys[i%1000]); !ok {
					b.Error("missing")
					return
				}
				i++
			}
		})
	})
}

// BenchmarkPropagation measures the time from issuing a Set on one replica
// to its event on another, and reports its median and 99th percentile.
func BenchmarkPropagation(b *testing.B) {
	ctx := context.Background()
	name := redistest.Name(b)
	w := join(b, srv.NewClient(), name)
	r := join(b, srv.NewClient(), name)
	events, cancel := r.Subscribe()
	defer cancel()
	lat := make([]time.Duration, 0, b.N)
	b.ResetTimer()
	for i := 0; b.Loop(); i++ {
		want := fmt.Sprint(i)
		start := time.Now()
		if _, err := w.Set(ctx, "k", want); err != nil {
			b.Fatal(err)
		}
		for e := range events {
			if e.Value == want {
				break
			}
		}
		lat = append(lat, time.Since(start))
	}
	b.StopTimer()
	slices.Sort(lat)
	b.ReportMetric(float64(lat[len(lat)/2].Microseconds()), "p50-µs")
	b.ReportMetric(float64(lat[len(lat)*99/100].Microseconds()), "p99-µs")
}
