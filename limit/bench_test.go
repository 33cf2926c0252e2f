package limit

import (
	"context"
	"runtime"
	"testing"
)

func benchAlgorithms(b *testing.B) map[string]func() Algorithm {
	return map[string]func() Algorithm{
		"fixed": func() Algorithm { f, _ := NewFixed(1 << 30); return f },
		"vegas": func() Algorithm {
			v, _ := NewVegas(WithVegasInitial(1<<20), WithVegasMax(1<<30))
			return v
		},
		"gradient2": func() Algorithm {
			g, _ := NewGradient2(WithGradient2Initial(1<<20), WithGradient2Min(1<<20), WithGradient2Max(1<<30))
			return g
		},
	}
}

// BenchmarkSimpleAcquireRelease measures one Acquire plus one Success.
func BenchmarkSimpleAcquireRelease(b *testing.B) {
	for name, mk := range benchAlgorithms(b) {
		b.Run(name, func(b *testing.B) {
			s, _ := NewSimple(mk())
			ctx := context.Background()
			b.ReportAllocs()
			for b.Loop() {
				t, err := s.Acquire(ctx)
				if err != nil {
					b.Fatal(err)
				}
				t.Success()
			}
		})
		b.Run(name+"/64goroutines", func(b *testing.B) {
			s, _ := NewSimple(mk())
			ctx := context.Background()
			b.ReportAllocs()
			b.SetParallelism(64 / max(1, testingProcs()))
			b.RunParallel(func(pb *testing.PB) {
				for pb.Next() {
					t, err := s.Acquire(ctx)
					if err != nil {
						b.Error(err)
						return
					}
					t.Success()
				}
			})
		})
	}
}

// BenchmarkSimpleAcquire and BenchmarkSimpleRelease split the pair: each
// times one side of batches of 1000 tokens.
func BenchmarkSimpleAcquire(b *testing.B) {
	for _, name := range []string{"fixed", "gradient2"} {
		b.Run(name, func(b *testing.B) { benchSplit(b, benchAlgorithms(b)[name](), true) })
	}
}

func BenchmarkSimpleRelease(b *testing.B) {
	for _, name := range []string{"fixed", "gradient2"} {
		b.Run(name, func(b *testing.B) { benchSplit(b, benchAlgorithms(b)[name](), false) })
	}
}

func benchSplit(b *testing.B, alg Algorithm, acquire bool) {
	s, _ := NewSimple(alg)
	ctx := context.Background()
	toks := make([]Token, 1000)
	b.ReportAllocs()
	b.ResetTimer()
	for done := 0; done < b.N; done += len(toks) {
		if !acquire {
			b.StopTimer()
		}
		for i := range toks {
			toks[i], _ = s.Acquire(ctx)
		}
		if acquire {
			b.StopTimer()
		} else {
			b.StartTimer()
		}
		for _, t := range toks {
			t.Success()
		}
		if acquire {
			b.StartTimer()
		} else {
			b.StopTimer()
		}
	}
}

func BenchmarkPartitionedAcquireRelease(b *testing.B) {
	f, _ := NewFixed(1 << 30)
	p, _ := NewPartitioned(f, WithPartition("live", 0.9), WithPartition("batch", 0.1))
	ctx := ContextWithPartition(context.Background(), "live")
	b.ReportAllocs()
	b.SetParallelism(64 / max(1, testingProcs()))
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			t, err := p.Acquire(ctx)
			if err != nil {
				b.Error(err)
				return
			}
			t.Success()
		}
	})
}

func BenchmarkBlockingAcquireRelease(b *testing.B) {
	bl, _ := NewBlocking(newSimple(b, 1<<30))
	ctx := context.Background()
	b.ReportAllocs()
	for b.Loop() {
		t, err := bl.Acquire(ctx)
		if err != nil {
			b.Fatal(err)
		}
		t.Success()
	}
}

// testingProcs is GOMAXPROCS, the parallelism unit of RunParallel.
func testingProcs() int { return runtime.GOMAXPROCS(0) }
