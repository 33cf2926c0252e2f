package queue

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/shepherd-go/shepherd/internal/redistest"
)

// TestDeadLetterSaysPermanent: a dead letter of a Permanent error says
// so (TaskInfo.Permanent), on Inspect and in DeadLetters, at its first
// attempt of three; one that used up its attempts does not; a replayed
// letter loses the mark, and gets it back only if it fails for good
// again; a letter written without the field (an earlier version) reads
// as not permanent.
func TestDeadLetterSaysPermanent(t *testing.T) {
	t.Parallel()
	q := open(t, redistest.Name(t))
	ctx := testCtx(t, 20*time.Second)
	permanent := make(chan bool, 10)
	permanent <- true
	serve(t, q, func(ctx context.Context, task *Task) ([]byte, error) {
		if string(task.Payload) == "perm" {
			select {
			case p := <-permanent:
				if p {
					return nil, Permanent(errors.New("bad input"))
				}
			default:
			}
			return nil, errors.New("transient")
		}
		return nil, errors.New("transient")
	}, WithWorkers(2), WithBackoff(time.Millisecond, time.Millisecond))
	for _, s := range []struct{ id, payload string }{{"perm", "perm"}, {"used-up", "x"}} {
		f, err := q.Submit(ctx, []byte(s.payload), WithTaskID(s.id), WithMaxAttempts(3))
		require.NoError(t, err)
		_, err = wait(t, f, 10*time.Second)
		require.ErrorIs(t, err, ErrFailed)
	}
	info, err := q.Inspect(ctx, "perm")
	require.NoError(t, err)
	assert.Equal(t, StateDead, info.State)
	assert.True(t, info.Permanent, "failed with Permanent")
	assert.Equal(t, 1, info.Attempt, "at its first attempt of 3")
	info, err = q.Inspect(ctx, "used-up")
	require.NoError(t, err)
	assert.False(t, info.Permanent, "used up its attempts")
	assert.Equal(t, 3, info.Attempt)
	dead, err := q.DeadLetters(ctx, 0, 10)
	require.NoError(t, err)
	marks := map[string]bool{}
	for _, d := range dead {
		marks[d.ID] = d.Permanent
	}
	assert.Equal(t, map[string]bool{"perm": true, "used-up": false}, marks)

	// Replayed, it fails transiently three times: no longer permanent.
	first, err := q.Inspect(ctx, "perm")
	require.NoError(t, err)
	require.NoError(t, q.Replay(ctx, "perm"))
	require.Eventually(t, func() bool {
		info, err = q.Inspect(ctx, "perm")
		return err == nil && info.State == StateDead && info.Finished.After(first.Finished)
	}, 10*time.Second, 10*time.Millisecond)
	assert.False(t, info.Permanent, "replayed, then used up its attempts")

	// A letter of an earlier version has no field: not permanent.
	require.NoError(t, q.rdb.HDel(ctx, q.lay.task("used-up"), fieldPermanent).Err())
	info, err = q.Inspect(ctx, "used-up")
	require.NoError(t, err)
	assert.False(t, info.Permanent)
}
