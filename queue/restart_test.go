package queue

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/shepherd-go/shepherd/internal/redistest"
)

// Redis killed and restarted with AOF while tasks wait and run: every
// task whose Submit returned nil completes once, its future too.
func TestRedisRestartWithAOFLosesNoTask(t *testing.T) {
	t.Parallel()
	own := redistest.Start(t, redistest.WithAOF())
	ctx := testCtx(t, 60*time.Second)
	q, err := Open(ctx, own.Client(), "restart", WithTTL(2*time.Second))
	require.NoError(t, err)
	defer func() { require.NoError(t, closeWithin(q)) }()
	runs := make(chan string, 1000)
	_, err = q.Serve(func(ctx context.Context, t *Task) ([]byte, error) {
		time.Sleep(20 * time.Millisecond)
		runs <- string(t.Payload)
		return t.Payload, nil
	}, WithWorkers(4), fastRetries)
	require.NoError(t, err)

	var futures []*Future
	for i := 0; i < 100; i++ {
		f, err := q.Submit(ctx, []byte(fmt.Sprint(i)))
		require.NoError(t, err)
		futures = append(futures, f)
	}
	require.NoError(t, own.Kill())
	time.Sleep(300 * time.Millisecond)
	require.NoError(t, own.Restart())
	for i := 100; i < 150; i++ {
		var f *Future
		require.Eventually(t, func() bool {
			f, err = q.Submit(ctx, []byte(fmt.Sprint(i)))
			return err == nil
		}, 10*time.Second, 20*time.Millisecond)
		futures = append(futures, f)
	}
	for i, f := range futures {
		res, err := wait(t, f, 20*time.Second)
		require.NoError(t, err)
		assert.Equal(t, fmt.Sprint(i), string(res))
	}
	seen := map[string]int{}
	for len(runs) > 0 {
		seen[<-runs]++
	}
	for i := range futures {
		assert.GreaterOrEqual(t, seen[fmt.Sprint(i)], 1, "task %d never ran", i)
	}
}
