package pool

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/shepherd-go/shepherd/internal/redistest"
	"github.com/stretchr/testify/require"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
)

// BenchmarkDispatchMetrics compares DispatchJob without metrics and with
// an SDK MeterProvider: the instruments' cost next to the round trips.
func BenchmarkDispatchMetrics(b *testing.B) {
	for _, withMetrics := range []bool{false, true} {
		b.Run(fmt.Sprintf("metrics=%v", withMetrics), func(b *testing.B) {
			ctx := context.Background()
			opts := []NodeOption{WithWorkerTTL(2 * time.Second), WithJobSinkBlockDuration(time.Second), WithMaxQueuedJobs(1 << 20)}
			if withMetrics {
				mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(sdkmetric.NewManualReader()))
				defer mp.Shutdown(ctx)
				opts = append(opts, WithMeterProvider(mp))
			}
			n, err := AddNode(ctx, srv.Client(), redistest.Name(b), opts...)
			require.NoError(b, err)
			defer n.Shutdown(ctx)
			_, err = n.AddWorker(ctx, newRecorder())
			require.NoError(b, err)
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				require.NoError(b, n.DispatchJob(ctx, fmt.Sprintf("k%d", i), nil))
			}
		})
	}
}
