package shepherdtest_test

import (
	"context"
	"errors"
	"math"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/shepherd-go/shepherd/queue"
	"github.com/shepherd-go/shepherd/shepherdtest"
)

// The handler gets the task the options describe, a ctx with the
// attempt's deadline, and its progress reports are kept.
func TestRunTaskGivesARealTaskAndKeepsProgress(t *testing.T) {
	t.Parallel()
	var got queue.Task
	var deadline time.Time
	before := time.Now()
	run := shepherdtest.RunTask(context.Background(), func(ctx context.Context, task *queue.Task) ([]byte, error) {
		got = *task
		deadline, _ = ctx.Deadline()
		if err := task.Progress(ctx, 50, "half"); err != nil {
			return nil, err
		}
		if err := task.Progress(ctx, 100, ""); err != nil {
			return nil, err
		}
		return append([]byte("done:"), task.Payload...), nil
	}, []byte("p"), shepherdtest.WithTaskID("t-7"), shepherdtest.WithAttempt(2), shepherdtest.WithMaxAttempts(4),
		shepherdtest.WithTenant("acme"), shepherdtest.WithTimeout(3*time.Second))

	require.NoError(t, run.Err)
	assert.Equal(t, shepherdtest.OutcomeDone, run.Outcome)
	assert.Equal(t, "done:p", string(run.Result))
	assert.False(t, run.Panicked)
	assert.False(t, run.TimedOut)
	assert.Equal(t, "t-7", got.ID)
	assert.Equal(t, "p", string(got.Payload))
	assert.Equal(t, 2, got.Attempt)
	assert.Equal(t, 4, got.MaxAttempts)
	assert.Equal(t, "acme", got.Tenant)
	assert.WithinRange(t, deadline, before.Add(3*time.Second), time.Now().Add(3*time.Second))
	require.Len(t, run.Progress, 2)
	assert.Equal(t, 50.0, run.Progress[0].Value)
	assert.Equal(t, "half", run.Progress[0].Message)
	assert.Equal(t, 2, run.Progress[0].Attempt)
	assert.Equal(t, 100.0, run.Progress[1].Value)
	assert.False(t, run.Progress[1].At.Before(run.Progress[0].At))
}

// The defaults are a first attempt with the queue's defaults.
func TestRunTaskDefaults(t *testing.T) {
	t.Parallel()
	var got *queue.Task
	var left time.Duration
	run := shepherdtest.RunTask(context.Background(), func(ctx context.Context, task *queue.Task) ([]byte, error) {
		got = task
		d, _ := ctx.Deadline()
		left = time.Until(d)
		return nil, nil
	}, nil)
	assert.Equal(t, shepherdtest.OutcomeDone, run.Outcome)
	assert.Equal(t, 1, got.Attempt)
	assert.Equal(t, queue.DefaultMaxAttempts, got.MaxAttempts)
	assert.Equal(t, "", got.Tenant)
	assert.NotEmpty(t, got.ID)
	assert.InDelta(t, queue.DefaultTimeout.Seconds(), left.Seconds(), 1)
}

// Each way an attempt ends maps to what the queue does next.
func TestRunTaskOutcomes(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	boom := errors.New("boom")
	fail := func(err error) queue.Handler {
		return func(context.Context, *queue.Task) ([]byte, error) { return nil, err }
	}

	run := shepherdtest.RunTask(ctx, fail(boom), nil, shepherdtest.WithAttempt(1), shepherdtest.WithMaxAttempts(2))
	assert.Equal(t, shepherdtest.OutcomeRetry, run.Outcome)
	assert.ErrorIs(t, run.Err, boom)

	run = shepherdtest.RunTask(ctx, fail(boom), nil, shepherdtest.WithAttempt(2), shepherdtest.WithMaxAttempts(2))
	assert.Equal(t, shepherdtest.OutcomeDead, run.Outcome, "the last attempt's failure")

	run = shepherdtest.RunTask(ctx, fail(queue.Permanent(boom)), nil)
	assert.Equal(t, shepherdtest.OutcomeDead, run.Outcome)
	assert.ErrorIs(t, run.Err, boom)

	run = shepherdtest.RunTask(ctx, fail(queue.RetryLater(time.Minute, boom)), nil, shepherdtest.WithAttempt(3), shepherdtest.WithMaxAttempts(3))
	assert.Equal(t, shepherdtest.OutcomeLater, run.Outcome, "RetryLater uses no attempt, even the last")
	assert.Equal(t, time.Minute, run.RetryIn)

	run = shepherdtest.RunTask(ctx, func(context.Context, *queue.Task) ([]byte, error) {
		return []byte("12345"), nil
	}, nil, shepherdtest.WithMaxResultSize(4))
	assert.Equal(t, shepherdtest.OutcomeDead, run.Outcome)
	assert.ErrorIs(t, run.Err, queue.ErrPayloadTooLarge)
	assert.Nil(t, run.Result)
}

// A panic is recovered and fails the attempt, with its stack.
func TestRunTaskRecoversAPanic(t *testing.T) {
	t.Parallel()
	run := shepherdtest.RunTask(context.Background(), func(context.Context, *queue.Task) ([]byte, error) {
		var m map[string]int
		m["x"] = 1 // assignment to a nil map
		return nil, nil
	}, nil)
	assert.True(t, run.Panicked)
	assert.Equal(t, shepherdtest.OutcomeRetry, run.Outcome)
	require.Error(t, run.Err)
	assert.True(t, strings.HasPrefix(run.Err.Error(), "panic: assignment to entry in nil map"), run.Err.Error())
	assert.Contains(t, run.Stack, "TestRunTaskRecoversAPanic")
}

// A result returned after the deadline is dropped and fails the
// attempt; Progress after the deadline fails as it would on a queue.
func TestRunTaskTimeout(t *testing.T) {
	t.Parallel()
	var progressErr error
	run := shepherdtest.RunTask(context.Background(), func(ctx context.Context, task *queue.Task) ([]byte, error) {
		<-ctx.Done()
		progressErr = task.Progress(ctx, 1, "late")
		return []byte("late"), nil
	}, nil, shepherdtest.WithTimeout(20*time.Millisecond))
	assert.True(t, run.TimedOut)
	assert.Nil(t, run.Result)
	assert.ErrorContains(t, run.Err, "after its deadline")
	assert.Equal(t, shepherdtest.OutcomeRetry, run.Outcome)
	assert.ErrorIs(t, progressErr, context.DeadlineExceeded)
	assert.Empty(t, run.Progress)
}

// Progress makes the queue's checks before it records.
func TestRunTaskProgressChecks(t *testing.T) {
	t.Parallel()
	var nan, long error
	run := shepherdtest.RunTask(context.Background(), func(ctx context.Context, task *queue.Task) ([]byte, error) {
		nan = task.Progress(ctx, math.NaN(), "")
		long = task.Progress(ctx, 1, strings.Repeat("x", queue.MaxProgressMessage+1))
		return nil, nil
	}, nil)
	assert.ErrorIs(t, nan, queue.ErrInvalidOption)
	assert.ErrorIs(t, long, queue.ErrInvalidOption)
	assert.Empty(t, run.Progress)
}

// A handler with a resource gets the one given.
func TestRunTaskWithAResource(t *testing.T) {
	t.Parallel()
	type conn struct{ name string }
	run := shepherdtest.RunTaskWith(context.Background(), &conn{"db-1"}, func(ctx context.Context, c *conn, task *queue.Task) ([]byte, error) {
		return []byte(c.name + ":" + string(task.Payload)), nil
	}, []byte("q"))
	require.NoError(t, run.Err)
	assert.Equal(t, "db-1:q", string(run.Result))
}

// A task a Server did not give still refuses Progress, as before the kit.
func TestProgressOfAHandMadeTask(t *testing.T) {
	t.Parallel()
	task := &queue.Task{ID: "x", Attempt: 1}
	assert.ErrorIs(t, task.Progress(context.Background(), 1, ""), queue.ErrNotRunning)
}
