package queue

import (
	"context"
	"strconv"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/shepherd-go/shepherd/internal/redistest"
)

func TestDurationsPercentilesOverTheLastAttempts(t *testing.T) {
	t.Parallel()
	var d durations
	_, _, _, n := d.percentiles()
	assert.Zero(t, n)
	for i := 1; i <= 100; i++ {
		d.add(time.Duration(i) * time.Millisecond)
	}
	p50, p90, p99, n := d.percentiles()
	assert.Equal(t, 100, n)
	assert.Equal(t, []time.Duration{50 * time.Millisecond, 90 * time.Millisecond, 99 * time.Millisecond}, []time.Duration{p50, p90, p99})
	// Only the last tookKept count: a run of slow attempts long ago is
	// forgotten.
	for range tookKept {
		d.add(time.Second)
	}
	p50, _, p99, n = d.percentiles()
	assert.Equal(t, tookKept, n)
	assert.Equal(t, time.Second, p50)
	assert.Equal(t, time.Second, p99)
}

func TestStatsShowsHandlerPercentiles(t *testing.T) {
	t.Parallel()
	q := open(t, redistest.Name(t), WithTTL(time.Second))
	ctx := testCtx(t, 20*time.Second)
	serve(t, q, func(ctx context.Context, t *Task) ([]byte, error) {
		ms, _ := strconv.Atoi(string(t.Payload))
		time.Sleep(time.Duration(ms) * time.Millisecond)
		return nil, nil
	}, WithWorkers(4))
	var fs []*Future
	for i := range 100 {
		ms := "2"
		if i%10 == 9 {
			ms = "60" // one in ten is slow
		}
		f, err := q.Submit(ctx, []byte(ms))
		require.NoError(t, err)
		fs = append(fs, f)
	}
	for _, f := range fs {
		_, err := wait(t, f, 10*time.Second)
		require.NoError(t, err)
	}
	var p ProcessInfo
	require.Eventually(t, func() bool {
		st, err := q.Stats(ctx)
		if err != nil || len(st.Processes) != 1 {
			return false
		}
		p = st.Processes[0]
		return p.Sampled == 100
	}, 5*time.Second, 20*time.Millisecond, "the keep-alive publishes the run times of all 100 attempts")
	assert.GreaterOrEqual(t, p.P50, 2*time.Millisecond)
	assert.Less(t, p.P50, 30*time.Millisecond, "most attempts are fast")
	assert.GreaterOrEqual(t, p.P99, 60*time.Millisecond, "the slow tenth shows in p99")
	assert.LessOrEqual(t, p.P50, p.P90)
	assert.LessOrEqual(t, p.P90, p.P99)
}
