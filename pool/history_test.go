package pool

import (
	"errors"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/shepherd-go/shepherd/internal/redistest"
)

// TestHistory: the node holding the janitor lease samples the pool into
// its history in Redis, at most once a HistoryStep however often it is
// asked, and History reads the samples back, oldest first, with the
// pool's jobs, workers and counters; the list expires after HistorySpan.
func TestHistory(t *testing.T) {
	t.Parallel()
	ctx := testCtx(t, 30*time.Second)
	name := redistest.Name(t)
	n := addNode(t, srv.Client(), name)
	addWorkers(t, n, newRecorder(), 2)
	for i := range 3 {
		require.NoError(t, n.DispatchJob(ctx, keyN(i), nil))
	}
	var h []HistoryPoint
	require.Eventually(t, func() bool {
		var err error
		h, err = History(ctx, srv.Client(), name, historyKeep)
		require.NoError(t, err)
		return len(h) > 0 && h[len(h)-1].Jobs == 3 && h[len(h)-1].Started == 3
	}, 2*HistoryStep, 50*time.Millisecond, "no sample of the 3 jobs: %+v", &h)
	last := h[len(h)-1]
	assert.EqualValues(t, 2, last.Workers)
	assert.EqualValues(t, 0, last.StartsFailed)
	assert.WithinDuration(t, time.Now(), last.At, 2*HistoryStep)
	for i := 1; i < len(h); i++ {
		assert.True(t, h[i].At.After(h[i-1].At), "oldest first")
	}

	// Asked again within the step, the script samples nothing.
	before, err := srv.Client().LLen(ctx, n.lay.history).Result()
	require.NoError(t, err)
	res, err := n.run(ctx, historyScript, "history",
		[]string{n.lay.settings, n.lay.shutdown, n.lay.history, n.lay.jobs, n.lay.jobStream, n.lay.workers, n.lay.counters},
		time.Hour.Milliseconds(), historyKeep, HistorySpan.Milliseconds()) // a step of an hour: the last sample is in it
	require.NoError(t, err)
	assert.EqualValues(t, 0, res)
	after, err := srv.Client().LLen(ctx, n.lay.history).Result()
	require.NoError(t, err)
	assert.Equal(t, before, after)
	ttl, err := srv.Client().PTTL(ctx, n.lay.history).Result()
	require.NoError(t, err)
	assert.Greater(t, ttl, HistorySpan-time.Minute)
	assert.LessOrEqual(t, ttl, HistorySpan)

	for _, bad := range []int{0, -1, historyKeep + 1} {
		_, err := History(ctx, srv.Client(), name, bad)
		assert.True(t, errors.Is(err, ErrInvalidOption), "n=%d: %v", bad, err)
	}
	none, err := History(ctx, srv.Client(), redistest.Name(t)+"-none", 10)
	require.NoError(t, err)
	assert.Empty(t, none)
}
