package queue

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/shepherd-go/shepherd/internal/redistest"
)

// A panic's error is one line, "panic: VALUE", wherever it shows (the
// future's *TaskError, Inspect, the dead letters), so that a log line
// stays one line; its stack is kept apart, bounded, in
// AttemptError.Stack (issue 24).
func TestPanicErrorIsOneLineAndItsStackApart(t *testing.T) {
	t.Parallel()
	q := open(t, redistest.Name(t))
	serve(t, q, func(ctx context.Context, t *Task) ([]byte, error) {
		switch string(t.Payload) {
		case "two lines":
			panic("first line\nsecond line")
		case "index":
			var rows []int
			_ = rows[t.Attempt+2] // a runtime error
		case "deep":
			deep(2000)
		case "error then panic":
			if t.Attempt == 1 {
				return nil, errors.New("plain failure")
			}
		}
		panic("handler bug")
	}, WithWorkers(1), fastRetries)
	ctx := testCtx(t, 10*time.Second)
	// failed submits a task and returns its final error.
	failed := func(payload string, attempts int) *TaskError {
		t.Helper()
		f, err := q.Submit(ctx, []byte(payload), WithMaxAttempts(attempts))
		require.NoError(t, err)
		_, err = wait(t, f, 5*time.Second)
		require.ErrorIs(t, err, ErrFailed)
		var te *TaskError
		require.ErrorAs(t, err, &te)
		require.Len(t, te.Attempts, attempts)
		return te
	}
	// startsAt checks that the stack starts with the goroutine's header,
	// then the frame of the function that panicked.
	startsAt := func(stack, fn string) {
		t.Helper()
		lines := strings.Split(stack, "\n")
		require.Greater(t, len(lines), 2, stack)
		assert.Regexp(t, `^goroutine \d+ \[running\]:$`, lines[0])
		assert.Contains(t, lines[1], fn, "the panicking frame comes first:\n%s", stack)
		assert.LessOrEqual(t, len(stack), 4096)
		assert.NotContains(t, stack, "queue.(*Server).runTask", "the worker's own frames are left out")
	}

	te := failed("", 2)
	assert.Equal(t, "queue: task "+te.ID+" failed after 2 attempt(s): attempt 2: panic: handler bug", te.Error())
	for _, a := range te.Attempts {
		assert.Equal(t, "panic: handler bug", a.Err)
	}
	startsAt(te.Attempts[1].Stack, "TestPanicErrorIsOneLineAndItsStackApart.func1(")
	assert.Empty(t, te.Attempts[0].Stack, "a task keeps its latest panic's stack only")
	info, err := q.Inspect(ctx, te.ID)
	require.NoError(t, err)
	require.Len(t, info.Errors, 2)
	assert.Equal(t, "panic: handler bug", info.Errors[1].Err)
	assert.Equal(t, te.Attempts[1].Stack, info.Errors[1].Stack, "Inspect has the stack")
	dead, err := q.DeadLetters(ctx, 0, 1)
	require.NoError(t, err)
	require.Len(t, dead, 1)
	assert.Equal(t, "panic: handler bug", dead[0].Errors[1].Err, "the dead letter's error")

	te = failed("two lines", 1)
	assert.NotContains(t, te.Error(), "\n")
	assert.Equal(t, `panic: first line\nsecond line`, te.Attempts[0].Err, "a value's line breaks are escaped")

	te = failed("index", 1)
	assert.Equal(t, "panic: runtime error: index out of range [3] with length 0", te.Attempts[0].Err)
	startsAt(te.Attempts[0].Stack, "TestPanicErrorIsOneLineAndItsStackApart.func1(")

	te = failed("deep", 1)
	startsAt(te.Attempts[0].Stack, "queue.deep(")
	assert.True(t, strings.HasSuffix(te.Attempts[0].Stack, "\n… (truncated)"), "a long stack is cut")

	te = failed("error then panic", 2)
	assert.Equal(t, "plain failure", te.Attempts[0].Err)
	assert.Empty(t, te.Attempts[0].Stack, "no stack for an error")
	assert.NotEmpty(t, te.Attempts[1].Stack)
}

// deep panics under n frames of its own.
func deep(n int) {
	if n == 0 {
		panic("deep down")
	}
	deep(n - 1)
}
