package rmap

import (
	"context"
	"fmt"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/shepherd-go/shepherd/internal/redistest"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestRedisRestartWithAOF kills Redis with SIGKILL and restarts it:
// everything acknowledged survives, and the replicas reconverge.
func TestRedisRestartWithAOF(t *testing.T) {
	t.Parallel()
	ctx := testCtx(t)
	s := redistest.Start(t, redistest.WithAOF())
	name := redistest.Name(t)
	a := join(t, s.NewClient(), name)
	b := join(t, s.NewClient(), name)
	for i := range 100 {
		_, err := a.Set(ctx, fmt.Sprint(i), fmt.Sprint(i))
		require.NoError(t, err)
	}
	want := a.Map()
	require.NoError(t, s.Kill())

	short, cancel := context.WithTimeout(ctx, 2*time.Second)
	_, err := a.Set(short, "down", "x")
	cancel()
	require.Error(t, err, "a write to a dead Redis fails")

	require.NoError(t, s.Restart())
	requireConverged(t, s.Client(), a, b)
	got := redisContent(t, s.Client(), a)
	delete(got, "down") // may or may not have reached Redis before the kill
	assert.Equal(t, want, got, "nothing acknowledged is lost")

	_, err = b.Set(ctx, "after", "restart")
	require.NoError(t, err)
	requireConverged(t, s.Client(), a, b)
	assert.GreaterOrEqual(t, a.Rev(), int64(101), "the revision survives with the data")
}

// TestRedisRestartWithAOFUnderWrites kills Redis while a writer keeps
// writing increasing values: after the restart every key holds at least
// its last acknowledged value, and every replica converges.
func TestRedisRestartWithAOFUnderWrites(t *testing.T) {
	t.Parallel()
	ctx := testCtx(t)
	s := redistest.Start(t, redistest.WithAOF())
	name := redistest.Name(t)
	w := join(t, s.NewClient(), name)
	r := join(t, s.NewClient(), name)

	var (
		mu    sync.Mutex
		acked = map[string]int{}
		total atomic.Int64
		wg    sync.WaitGroup
	)
	stop := make(chan struct{})
	wg.Add(1)
	go func() {
		defer wg.Done()
		for i := 0; ; i++ {
			select {
			case <-stop:
				return
			default:
			}
			key := fmt.Sprint("k", i%20)
			wctx, cancel := context.WithTimeout(ctx, time.Second)
			_, err := w.Set(wctx, key, fmt.Sprint(i))
			cancel()
			if err == nil {
				mu.Lock()
				acked[key] = i
				mu.Unlock()
				total.Add(1)
			}
		}
	}()
	waitAcks := func(n int64) {
		require.Eventually(t, func() bool { return total.Load() >= n }, 15*time.Second, time.Millisecond)
	}
	waitAcks(200)
	require.NoError(t, s.Kill())
	require.NoError(t, s.Restart())
	waitAcks(total.Load() + 200)
	close(stop)
	wg.Wait()

	requireConverged(t, s.Client(), w, r)
	got := redisContent(t, s.Client(), w)
	for key, last := range acked {
		v, err := strconv.Atoi(got[key])
		require.NoError(t, err, key)
		assert.GreaterOrEqual(t, v, last, "acknowledged write to %s lost", key)
	}
}

// TestRedisRestartWithoutPersistence restarts Redis empty: the replicas
// drop their copies, and a new incarnation of the map replicates.
func TestRedisRestartWithoutPersistence(t *testing.T) {
	t.Parallel()
	ctx := testCtx(t)
	s := redistest.Start(t)
	name := redistest.Name(t)
	a := join(t, s.NewClient(), name)
	b := join(t, s.NewClient(), name)
	events, cancel := b.Subscribe()
	defer cancel()
	for i := range 20 {
		_, err := a.Set(ctx, fmt.Sprint(i), "v")
		require.NoError(t, err)
	}
	require.NoError(t, b.Sync(ctx))
	versionBefore := a.Version()
	require.NoError(t, s.Kill())
	require.NoError(t, s.Restart())
	require.Eventually(t, func() bool { return a.Len() == 0 && b.Len() == 0 }, 10*time.Second, time.Millisecond,
		"replicas converge to the empty map Redis now holds")

	deletes := 0
	for deletes < 20 {
		select {
		case e := <-events:
			if e.Kind == EventDelete {
				deletes++
			}
		case <-ctx.Done():
			t.Fatalf("subscriber saw %d of 20 deletes", deletes)
		}
	}

	_, err := b.Set(ctx, "new", "life")
	require.NoError(t, err)
	requireConverged(t, s.Client(), a, b)
	assert.EqualValues(t, 1, a.Rev())
	// The revision restarted; the local version did not.
	assert.Greater(t, a.Version(), versionBefore)
}
