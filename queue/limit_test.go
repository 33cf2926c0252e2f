package queue

import (
	"context"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/shepherd-go/shepherd/internal/redistest"
	"github.com/shepherd-go/shepherd/limit"
)

// scripted is a limit.Algorithm whose limit the test sets; it records
// the samples it is fed.
type scripted struct {
	limit   atomic.Int64
	mu      sync.Mutex
	samples []limit.Sample
}

func (a *scripted) Update(s limit.Sample) int {
	a.mu.Lock()
	a.samples = append(a.samples, s)
	a.mu.Unlock()
	return int(a.limit.Load())
}

func (a *scripted) Limit() int { return int(a.limit.Load()) }

func (a *scripted) got() []limit.Sample {
	a.mu.Lock()
	defer a.mu.Unlock()
	return append([]limit.Sample(nil), a.samples...)
}

func TestConcurrencyLimitBoundsTakesAndLearnsFromAttempts(t *testing.T) {
	t.Parallel()
	name := redistest.Name(t)
	q := open(t, name)
	ctx := testCtx(t, 30*time.Second)
	alg := &scripted{}
	alg.limit.Store(2)
	var running, peak, laters atomic.Int64
	s := serve(t, q, func(ctx context.Context, t *Task) ([]byte, error) {
		n := running.Add(1)
		defer running.Add(-1)
		for {
			p := peak.Load()
			if n <= p || peak.CompareAndSwap(p, n) {
				break
			}
		}
		switch string(t.Payload) {
		case "later":
			if laters.Add(1) == 1 { // RetryLater uses no attempt: count the calls
				return nil, RetryLater(time.Millisecond, context.DeadlineExceeded)
			}
		case "slow":
			if t.Attempt == 1 {
				<-ctx.Done()
				return nil, ctx.Err()
			}
		}
		time.Sleep(5 * time.Millisecond)
		return nil, nil
	}, WithWorkers(6), WithConcurrencyLimit(alg, 1), fastRetries)
	assert.Equal(t, 2, s.Limit())
	var fs []*Future
	for range 20 {
		f, err := q.Submit(ctx, []byte("x"))
		require.NoError(t, err)
		fs = append(fs, f)
	}
	// Another process sees what the limit leaves: never more than 2 in
	// flight, though 6 workers are idle.
	stats := open(t, name)
	for _, f := range fs {
		st, err := stats.Stats(ctx)
		require.NoError(t, err)
		assert.LessOrEqual(t, st.InFlight, int64(2), "a task was taken beyond the limit")
		_, err = wait(t, f, 10*time.Second)
		require.NoError(t, err)
	}
	assert.Equal(t, int64(2), peak.Load())
	assert.Len(t, alg.got(), 20, "one sample per attempt")
	for _, smp := range alg.got() {
		assert.Positive(t, smp.RTT)
		assert.False(t, smp.Dropped)
		assert.GreaterOrEqual(t, smp.InFlight, 1)
		assert.LessOrEqual(t, smp.InFlight, 2)
	}

	// A higher limit lets more in, never beyond the workers; RetryLater
	// and timeouts are drops.
	alg.limit.Store(100)
	peak.Store(0)
	fs = fs[:0]
	for range 30 {
		f, err := q.Submit(ctx, []byte("x"))
		require.NoError(t, err)
		fs = append(fs, f)
	}
	for _, p := range []string{"later", "slow"} {
		f, err := q.Submit(ctx, []byte(p), WithTimeout(50*time.Millisecond))
		require.NoError(t, err)
		fs = append(fs, f)
	}
	for _, f := range fs {
		_, err := wait(t, f, 10*time.Second)
		require.NoError(t, err)
	}
	assert.Greater(t, peak.Load(), int64(2))
	assert.LessOrEqual(t, peak.Load(), int64(6))
	assert.Equal(t, 6, s.Limit(), "the limit is reported within the workers")
	drops := 0
	for _, smp := range alg.got() {
		if smp.Dropped {
			drops++
		}
	}
	assert.Equal(t, 2, drops, "RetryLater and a timeout are drops")
	// The process's record shows its limit as of its last keep-alive.
	q.kickKeepAlive()
	require.Eventually(t, func() bool {
		st, err := stats.Stats(ctx)
		if err != nil {
			return false
		}
		for _, p := range st.Processes {
			if p.ID == q.Process() {
				return p.Limit == 6
			}
		}
		return false
	}, 5*time.Second, 5*time.Millisecond, "the process's record does not show its limit")
}

func TestDefaultConcurrencyLimitRuns(t *testing.T) {
	t.Parallel()
	q := open(t, redistest.Name(t))
	ctx := testCtx(t, 30*time.Second)
	s := serve(t, q, echo, WithWorkers(4), WithConcurrencyLimit(nil, 2))
	assert.Equal(t, 2, s.Limit(), "Gradient2 starts at the floor")
	var fs []*Future
	for range 50 {
		f, err := q.Submit(ctx, []byte("x"))
		require.NoError(t, err)
		fs = append(fs, f)
	}
	for _, f := range fs {
		_, err := wait(t, f, 10*time.Second)
		require.NoError(t, err)
	}
	assert.GreaterOrEqual(t, s.Limit(), 2)
	assert.LessOrEqual(t, s.Limit(), 4)

	for _, opts := range [][]ServeOption{
		{WithConcurrencyLimit(nil, 0)},
		{WithWorkers(2), WithConcurrencyLimit(nil, 3)},
		{WithConcurrencyLimit(nil, 1), WithPrefetch(1)},
	} {
		_, err := open(t, redistest.Name(t)).Serve(echo, opts...)
		assert.ErrorIs(t, err, ErrInvalidOption)
	}
}
