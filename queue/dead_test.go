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

// deadIDs lists the ids of the queue's dead letters, newest first.
func deadIDs(t *testing.T, q *Queue) []string {
	t.Helper()
	dead, err := q.DeadLetters(testCtx(t, 5*time.Second), 0, 10)
	require.NoError(t, err)
	ids := make([]string, len(dead))
	for i, d := range dead {
		ids[i] = d.ID
	}
	return ids
}

// Dead letters are listed, and dropped at MaxDeadLetters, in the order
// they died, also when they die in the same millisecond: here three die
// in one script call (one Redis time), the newest with the smallest id,
// so that an order that falls back to the ids lists them backwards and
// drops the newest (issue 24).
func TestDeadLettersOfOneMillisecondKeepTheirOrder(t *testing.T) {
	t.Parallel()
	ctx := testCtx(t, 10*time.Second)
	for _, bound := range []int{10, 2} {
		q := open(t, redistest.Name(t), WithMaxDeadLetters(bound))
		for _, id := range []string{"a", "b", "c"} {
			_, err := q.Submit(ctx, nil, WithTaskID(id), WithMaxAttempts(1))
			require.NoError(t, err)
		}
		// A server of this process that runs nothing: its take and its
		// recording of outcomes, called by hand.
		s := &Server{q: q, running: map[string]*run{}}
		tasks, _, err := s.dequeue(ctx, q.lay, 3)
		require.NoError(t, err)
		require.Len(t, tasks, 3)
		byID := map[string]*Task{}
		for _, task := range tasks {
			byID[task.ID] = task
		}
		var ends []outcomeReq
		for _, id := range []string{"c", "b", "a"} { // the order they die in
			ends = append(ends, outcomeReq{t: byID[id], kind: "perm", data: "bad input"})
		}
		_, _, _, err = s.record(ctx, q.lay, ends, 0)
		require.NoError(t, err)
		if bound == 2 {
			assert.Equal(t, []string{"a", "b"}, deadIDs(t, q), "MaxDeadLetters 2: the newest two, newest first; the oldest (c) dropped")
		} else {
			assert.Equal(t, []string{"a", "b", "c"}, deadIDs(t, q), "newest first")
		}
	}
}

// The scenario of issue 24: one worker, three tasks failed one after the
// other, each waited for before the next is submitted. Each round's ids
// are in the reverse order of their deaths, so that two letters dying in
// the same millisecond come out wrong if the order falls back to the ids.
func TestDeadLettersOneAfterAnotherKeepTheirOrder(t *testing.T) {
	t.Parallel()
	ctx := testCtx(t, 60*time.Second)
	for round := range 8 {
		q := open(t, redistest.Name(t), WithMaxDeadLetters(2))
		s := serve(t, q, func(ctx context.Context, t *Task) ([]byte, error) {
			return nil, Permanent(errors.New("bad input"))
		}, WithWorkers(1))
		for _, id := range []string{"3", "2", "1"} {
			f, err := q.Submit(ctx, nil, WithTaskID(id))
			require.NoError(t, err)
			_, err = wait(t, f, 5*time.Second)
			require.ErrorIs(t, err, ErrFailed)
		}
		require.Equal(t, []string{"1", "2"}, deadIDs(t, q), "round %d: the newest two, newest first", round)
		require.NoError(t, s.Stop(ctx))
	}
}
