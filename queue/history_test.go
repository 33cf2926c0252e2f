package queue

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/shepherd-go/shepherd/internal/redistest"
)

// Two processes add what they saw to one history, which any reader gets
// from Redis: tasks done, attempts failed, dead letters, the handlers'
// and the waits' percentiles, and the depth the janitor sampled.
func TestHistoryIsSharedInRedis(t *testing.T) {
	t.Parallel()
	name := redistest.Name(t)
	q1, q2 := open(t, name), open(t, name)
	ctx := testCtx(t, 30*time.Second)
	h := func(ctx context.Context, t *Task) ([]byte, error) {
		time.Sleep(2 * time.Millisecond)
		if string(t.Payload) == "bad" {
			return nil, Permanent(errors.New("no"))
		}
		return nil, nil
	}
	serve(t, q1, h, WithWorkers(2))
	serve(t, q2, h, WithWorkers(2))
	var fs []*Future
	for i := range 20 {
		p := "ok"
		if i%5 == 0 {
			p = "bad"
		}
		f, err := q1.Submit(ctx, []byte(p))
		require.NoError(t, err)
		fs = append(fs, f)
	}
	for _, f := range fs {
		_, _ = wait(t, f, 10*time.Second)
	}
	_, err := q2.Submit(ctx, nil, WithDelay(time.Hour))
	require.NoError(t, err)
	q1.flushHistory(ctx, true)
	q2.flushHistory(ctx, false)

	c, err := NewClient(q1.rdb, name)
	require.NoError(t, err)
	for _, step := range []time.Duration{HistoryFine, HistoryCoarse} {
		points, err := c.History(ctx, step, 3)
		require.NoError(t, err)
		require.Len(t, points, 3)
		// The test may straddle a bucket's end: counters add up over
		// the buckets, the rest is read from the last one written.
		var done, failed, dead int64
		now := points[2]
		for _, p := range points {
			done, failed, dead = done+p.Done, failed+p.Failed, dead+p.Dead
		}
		if !now.Sampled {
			now = points[1]
		}
		assert.EqualValues(t, 16, done, "step %v", step)
		assert.EqualValues(t, 4, failed)
		assert.EqualValues(t, 4, dead)
		assert.GreaterOrEqual(t, now.HandlerP50, 2*time.Millisecond)
		assert.Less(t, now.HandlerP50, time.Second)
		assert.GreaterOrEqual(t, now.HandlerP99, now.HandlerP50)
		assert.GreaterOrEqual(t, now.WaitP99, now.WaitP50)
		assert.True(t, now.Sampled)
		assert.EqualValues(t, 1, now.Delayed)
		assert.EqualValues(t, 4, now.DeadLetters)
		assert.Equal(t, step, points[2].At.Sub(points[1].At))
	}
	keys := redistest.Keys(t, q1.rdb, q1.lay.histPrefix+"*")
	require.NotEmpty(t, keys)
	for _, k := range keys {
		ttl, err := q1.rdb.PTTL(ctx, k).Result()
		require.NoError(t, err)
		assert.Positive(t, ttl, k)
		assert.LessOrEqual(t, ttl, HistoryCoarseSpan, k)
	}
	for _, bad := range []struct {
		step time.Duration
		n    int
	}{{time.Second, 1}, {HistoryFine, 0}, {HistoryFine, 361}, {HistoryCoarse, 1441}} {
		_, err := c.History(ctx, bad.step, bad.n)
		assert.ErrorIs(t, err, ErrInvalidOption, "%v × %d", bad.step, bad.n)
	}
}

func TestBinPercentiles(t *testing.T) {
	t.Parallel()
	h := map[string]string{}
	for _, d := range []time.Duration{time.Millisecond, time.Millisecond, time.Millisecond, 100 * time.Millisecond} {
		k := "h" + itoa(binOf(d))
		h[k] = itoa(atoi(h[k]) + 1)
	}
	p50, p99 := binPercentiles(h, "h")
	assert.InEpsilon(t, float64(time.Millisecond), float64(p50), 0.2)
	assert.InEpsilon(t, float64(100*time.Millisecond), float64(p99), 0.2)
}

func itoa(n int) string { return fmt.Sprint(n) }
func atoi(s string) int { n, _ := strconv.Atoi(s); return n }

// Tasks lists the latest finished tasks, done or cancelled, newest first,
// while their outcomes are kept; the list expires with them.
func TestTasksListsTheLatestFinished(t *testing.T) {
	t.Parallel()
	q := open(t, redistest.Name(t))
	ctx := testCtx(t, 20*time.Second)
	serve(t, q, echo, WithWorkers(1))
	var done []string
	for i := range 5 {
		f, err := q.Submit(ctx, []byte(fmt.Sprint(i)), WithRetention(time.Minute))
		require.NoError(t, err)
		_, err = wait(t, f, 5*time.Second)
		require.NoError(t, err)
		done = append(done, f.ID())
	}
	c, err := q.Submit(ctx, nil, WithDelay(time.Hour), WithRetention(time.Minute))
	require.NoError(t, err)
	require.NoError(t, q.Cancel(ctx, c.ID()))
	got, err := q.Tasks(ctx, StateDone, 1, 3)
	require.NoError(t, err)
	require.Len(t, got, 3)
	assert.Equal(t, []string{done[3], done[2], done[1]}, []string{got[0].ID, got[1].ID, got[2].ID}, "newest first, after the offset")
	res, err := q.Result(ctx, done[4])
	require.NoError(t, err)
	assert.Equal(t, "4#1", string(res))
	cancelled, err := q.Tasks(ctx, StateCancelled, 0, 10)
	require.NoError(t, err)
	require.Len(t, cancelled, 1)
	assert.Equal(t, c.ID(), cancelled[0].ID)
	ttl, err := q.rdb.PTTL(ctx, q.lay.finished).Result()
	require.NoError(t, err)
	assert.Positive(t, ttl)
	assert.LessOrEqual(t, ttl, time.Minute, "the list expires with its outcomes")
}
