package queue

import (
	"context"
	"math"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/shepherd-go/shepherd/internal/redistest"
)

// A handler's progress is read from any process while it runs and after;
// a late attempt's report is refused; bad reports are refused at once.
func TestProgressIsReadFromAnyProcess(t *testing.T) {
	t.Parallel()
	name := redistest.Name(t)
	q, other := open(t, name), open(t, name)
	ctx := testCtx(t, 20*time.Second)
	reported := make(chan *Task, 1)
	release, free := gate(t)
	serve(t, q, func(ctx context.Context, t *Task) ([]byte, error) {
		if err := t.Progress(ctx, 40, "rendering page 4 of 10"); err != nil {
			return nil, err
		}
		reported <- t
		<-release
		return nil, t.Progress(ctx, 100, "")
	}, WithWorkers(1))
	f, err := q.Submit(ctx, nil)
	require.NoError(t, err)
	task := <-reported
	p, err := f.Progress(ctx)
	require.NoError(t, err)
	require.NotNil(t, p)
	assert.Equal(t, 40.0, p.Value)
	assert.Equal(t, "rendering page 4 of 10", p.Message)
	assert.Equal(t, 1, p.Attempt)
	assert.WithinDuration(t, time.Now(), p.At, 5*time.Second)
	info, err := other.Inspect(ctx, f.ID())
	require.NoError(t, err)
	assert.Equal(t, p, info.Progress, "another process reads the same")

	for _, bad := range []float64{math.NaN(), math.Inf(1)} {
		assert.ErrorIs(t, task.Progress(ctx, bad, ""), ErrInvalidOption)
	}
	assert.ErrorIs(t, task.Progress(ctx, 1, string(make([]byte, MaxProgressMessage+1))), ErrInvalidOption)
	free()
	_, err = wait(t, f, 5*time.Second)
	require.NoError(t, err)
	p, err = f.Progress(ctx)
	require.NoError(t, err)
	assert.Equal(t, 100.0, p.Value, "the last report stays with the outcome")
	assert.ErrorIs(t, task.Progress(ctx, 7, "late"), ErrNotRunning, "a finished attempt reports")
	p, err = f.Progress(ctx)
	require.NoError(t, err)
	assert.Equal(t, 100.0, p.Value)

	none, err := q.Submit(ctx, nil, WithDelay(time.Hour))
	require.NoError(t, err)
	p, err = none.Progress(ctx)
	require.NoError(t, err)
	assert.Nil(t, p)
}
