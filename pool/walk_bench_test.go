package pool

import (
	"context"
	"fmt"
	"os"
	"strconv"
	"testing"
	"time"

	"github.com/shepherd-go/shepherd/internal/redistest"
)

// BenchmarkRecoveryWalkAtDepth measures the janitor's walk through the
// job records (recover.go) in a pool of SHEPHERD_WALK_JOBS running jobs
// (100,000 unless set) on 8 workers of one node, on a Redis of its own:
// redis_cpu_ms_per_walk, the Redis CPU of one whole walk, and
// idle_redis_cpu_ms_per_s, what the pool at rest costs Redis a second
// with the default PendingJobTTL (keep-alives, janitor passes, the
// periodic walks), over 20 s.
//
//	go test -run '^$' -bench RecoveryWalkAtDepth -benchtime 1x ./pool/
func BenchmarkRecoveryWalkAtDepth(b *testing.B) {
	jobs := 100_000
	if v, err := strconv.Atoi(os.Getenv("SHEPHERD_WALK_JOBS")); err == nil && v > 0 {
		jobs = v
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Minute)
	defer cancel()
	own, err := redistest.New()
	if err != nil {
		b.Fatal(err)
	}
	defer own.Close()
	rdb := own.NewClient()
	defer rdb.Close()
	name := redistest.Name(b)
	n, err := AddNode(ctx, rdb, name, WithWorkerTTL(3*time.Second))
	if err != nil {
		b.Fatal(err)
	}
	defer n.Close(ctx)
	for range 8 {
		if _, err := n.AddWorker(ctx, nopHandler{}); err != nil {
			b.Fatal(err)
		}
	}
	keys := make([]string, jobs)
	for i := range keys {
		keys[i] = fmt.Sprintf("device-%07d", i)
	}
	dispatchAll(b, ctx, n, keys, []byte("config"))
	admin := own.NewClient()
	defer admin.Close()
	b.ResetTimer()
	for range b.N {
		walk := &sweep{cursor: "0"}
		cpu0 := costCPU(ctx, admin)
		for walk.cursor != "" {
			n.recoverJobs(ctx, walk)
		}
		b.ReportMetric((costCPU(ctx, admin)-cpu0)*1000, "redis_cpu_ms_per_walk")
		b.ReportMetric(float64(walk.took.Milliseconds()), "walk_ms")
	}
	b.StopTimer()
	const idle = 20 * time.Second
	cpu0 := costCPU(ctx, admin)
	time.Sleep(idle)
	b.ReportMetric((costCPU(ctx, admin)-cpu0)*1000/idle.Seconds(), "idle_redis_cpu_ms_per_s")
}
