package queue

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/shepherd-go/shepherd/internal/redistest"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestDeleteDeadDeletesOneDeadLetter(t *testing.T) {
	t.Parallel()
	q := open(t, redistest.Name(t))
	ctx := testCtx(t, 10*time.Second)
	serve(t, q, func(ctx context.Context, t *Task) ([]byte, error) {
		return nil, Permanent(errors.New("bad input"))
	}, WithWorkers(1))
	for _, id := range []string{"d1", "d2"} {
		f, err := q.Submit(ctx, []byte(id), WithTaskID(id))
		require.NoError(t, err)
		_, err = wait(t, f, 5*time.Second)
		require.ErrorIs(t, err, ErrFailed)
	}
	_, err := q.Submit(ctx, nil, WithTaskID("later"), WithDelay(time.Hour))
	require.NoError(t, err)

	require.NoError(t, q.DeleteDead(ctx, "d1"))
	dead, err := q.DeadLetters(ctx, 0, 10)
	require.NoError(t, err)
	require.Len(t, dead, 1)
	assert.Equal(t, "d2", dead[0].ID, "the other dead letter stays")
	_, err = q.Inspect(ctx, "d1")
	assert.ErrorIs(t, err, ErrTaskNotFound, "its record is gone")
	st, err := q.Stats(ctx)
	require.NoError(t, err)
	assert.EqualValues(t, 1, st.Dead)

	assert.ErrorIs(t, q.DeleteDead(ctx, "d1"), ErrTaskNotFound, "twice")
	assert.ErrorIs(t, q.DeleteDead(ctx, "later"), ErrTaskNotFound, "an unfinished task is not a dead letter")
	info, err := q.Inspect(ctx, "later")
	require.NoError(t, err, "and it is left alone")
	assert.Equal(t, StateDelayed, info.State)
	assert.ErrorIs(t, q.DeleteDead(ctx, ""), ErrInvalidOption)
	// The id is free again: a new task may take it.
	_, err = q.Submit(ctx, nil, WithTaskID("d1"), WithDelay(time.Hour))
	assert.NoError(t, err)
}
