package shepherdtest_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/shepherd-go/shepherd/queue"
	"github.com/shepherd-go/shepherd/shepherdtest"
)

// Work runs what is due (tasks submitted by handlers too, a short
// delay, a retry), leaves what is due later, and the assertions see
// what was submitted with what options and how each task ended.
func TestWorkRunsUntilIdleAndTasksTellHowEachEnded(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	q := shepherdtest.OpenQueue(t, shepherdtest.Redis(t), "mail")
	require.NoError(t, q.SetTenant(ctx, "acme", 2))

	_, err := q.Submit(ctx, []byte(`{"to":"ada"}`), queue.WithTenant("acme"), queue.WithPriority(3), queue.WithDedup("welcome-ada", time.Hour))
	require.NoError(t, err)
	_, err = q.Submit(ctx, []byte("soon"), queue.WithDelay(200*time.Millisecond))
	require.NoError(t, err)
	later, err := q.Submit(ctx, []byte("tomorrow"), queue.WithDelay(24*time.Hour))
	require.NoError(t, err)
	_, err = q.Submit(ctx, []byte("flaky"), queue.WithMaxAttempts(3))
	require.NoError(t, err)
	_, err = q.Submit(ctx, []byte("bad"))
	require.NoError(t, err)
	gone, err := q.Submit(ctx, []byte("never"), queue.WithDelay(time.Hour))
	require.NoError(t, err)
	require.NoError(t, q.Cancel(ctx, gone.ID()))

	// Before Work: what was submitted, with its options.
	first := q.RequireTask(t, shepherdtest.PayloadJSON(map[string]string{"to": "ada"}), shepherdtest.InState(queue.StateWaiting))
	assert.Equal(t, "acme", first.Tenant)
	assert.Equal(t, 3, first.Priority)
	assert.Equal(t, "welcome-ada", first.DedupKey)
	q.RequireTask(t, shepherdtest.Payload([]byte("soon")), shepherdtest.InState(queue.StateDelayed), shepherdtest.Delayed(200*time.Millisecond))
	q.RequireTask(t, shepherdtest.InState(queue.StateDelayed), shepherdtest.Delayed(time.Hour))
	q.RequireTasks(t, 2, shepherdtest.Delayed(time.Hour)) // a cancelled task keeps its due time
	q.RequireTask(t, shepherdtest.ID(gone.ID()), shepherdtest.InState(queue.StateCancelled))

	var flaky atomic.Int32
	q.Work(t, func(ctx context.Context, task *queue.Task) ([]byte, error) {
		switch p := string(task.Payload); p {
		case "bad":
			return nil, queue.Permanent(errors.New("bad payload"))
		case "flaky":
			if flaky.Add(1) < 3 {
				return nil, errors.New("not yet")
			}
		case "soon":
			if _, err := q.Submit(ctx, []byte("follow-up")); err != nil {
				return nil, err
			}
		}
		return []byte("sent " + string(task.Payload)), nil
	}, shepherdtest.WithServeOptions(queue.WithWorkers(2), queue.WithBackoff(10*time.Millisecond, 20*time.Millisecond)))

	all := q.AllTasks(t)
	require.Len(t, all, 7)
	for i := 1; i < len(all); i++ {
		assert.False(t, all[i].Submitted.Before(all[i-1].Submitted), "oldest submitted first")
	}
	done := q.RequireTask(t, shepherdtest.Tenant("acme"), shepherdtest.InState(queue.StateDone))
	assert.Equal(t, `sent {"to":"ada"}`, string(done.Result))
	assert.Equal(t, `{"to":"ada"}`, string(done.Payload), "a done task's payload, from Work")
	q.RequireTask(t, shepherdtest.Payload([]byte("soon")), shepherdtest.Result([]byte("sent soon")))
	q.RequireTask(t, shepherdtest.Payload([]byte("follow-up")), shepherdtest.InState(queue.StateDone))
	f := q.RequireTask(t, shepherdtest.Payload([]byte("flaky")), shepherdtest.InState(queue.StateDone), shepherdtest.MaxAttempts(3))
	assert.Equal(t, 3, f.Attempt)
	assert.Len(t, f.Errors, 2)
	dead := q.RequireTask(t, shepherdtest.InState(queue.StateDead))
	assert.Equal(t, "bad", string(dead.Payload))
	require.Len(t, dead.Errors, 1)
	assert.Equal(t, "bad payload", dead.Errors[0].Err)
	q.RequireTask(t, shepherdtest.ID(later.ID()), shepherdtest.InState(queue.StateDelayed))
	q.RequireNoTask(t, shepherdtest.InState(queue.StateWaiting))
	q.RequireNoTask(t, shepherdtest.InState(queue.StateActive))
	q.RequireNoTask(t, shepherdtest.Where("ran twice", func(ti queue.TaskInfo) bool {
		return ti.State == queue.StateDone && ti.Attempt > 1 && string(ti.Payload) != "flaky"
	}))

	// Work again, after more Submits.
	_, err = q.Submit(ctx, []byte("again"))
	require.NoError(t, err)
	q.Work(t, func(context.Context, *queue.Task) ([]byte, error) { return []byte("ok"), nil })
	q.RequireTask(t, shepherdtest.Payload([]byte("again")), shepherdtest.Result([]byte("ok")))
}

// The assertions fail, listing the queue, when the count is not the one
// wanted.
func TestRequireTaskFailsWithTheQueueListed(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	q := shepherdtest.OpenQueue(t, shepherdtest.Redis(t), "q")
	for i := range 2 {
		_, err := q.Submit(ctx, []byte(fmt.Sprint("p", i)), queue.WithTaskID(fmt.Sprint("t", i)))
		require.NoError(t, err)
	}
	msg := fatalOf(t, func(tb testing.TB) { q.RequireTask(tb, shepherdtest.InState(queue.StateWaiting)) })
	assert.Contains(t, msg, `want 1 task(s) with state waiting, found 2`)
	assert.Contains(t, msg, `t0 waiting`)
	assert.Contains(t, msg, `payload="p1"`)

	msg = fatalOf(t, func(tb testing.TB) { q.RequireTask(tb, shepherdtest.Payload([]byte("p9"))) })
	assert.Contains(t, msg, `want 1 task(s) with payload "p9", found 0`)

	msg = fatalOf(t, func(tb testing.TB) { q.RequireNoTask(tb, shepherdtest.ID("t1")) })
	assert.Contains(t, msg, `want no task with id "t1", found 1`)

	assert.Empty(t, fatalOf(t, func(tb testing.TB) { q.RequireTasks(tb, 2) }))
	assert.Empty(t, fatalOf(t, func(tb testing.TB) { q.RequireNoTask(tb, shepherdtest.Tenant("nobody")) }))
}

// Work fails the test when the queue does not become idle in time: here
// it is paused, so its task waits.
func TestWorkFailsWhenTheQueueStaysBusy(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	q := shepherdtest.OpenQueue(t, shepherdtest.Redis(t), "paused")
	require.NoError(t, q.Pause(ctx))
	_, err := q.Submit(ctx, []byte("x"))
	require.NoError(t, err)
	start := time.Now()
	msg := fatalOf(t, func(tb testing.TB) {
		q.Work(tb, func(context.Context, *queue.Task) ([]byte, error) { return nil, nil }, shepherdtest.WithWorkTimeout(300*time.Millisecond))
	})
	assert.Less(t, time.Since(start), 5*time.Second)
	assert.Contains(t, msg, `queue "paused" not idle after 300ms`)
	assert.Contains(t, msg, "1 waiting (paused: true)")
	q.RequireTask(t, shepherdtest.InState(queue.StateWaiting))
}

// A retry due after WithDueWithin is left for later.
func TestWorkLeavesRetriesDueLater(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	q := shepherdtest.OpenQueue(t, shepherdtest.Redis(t), "retry")
	_, err := q.Submit(ctx, []byte("x"))
	require.NoError(t, err)
	start := time.Now()
	q.Work(t, func(context.Context, *queue.Task) ([]byte, error) { return nil, errors.New("down") },
		shepherdtest.WithDueWithin(100*time.Millisecond),
		shepherdtest.WithServeOptions(queue.WithBackoff(time.Minute, time.Minute)))
	assert.Less(t, time.Since(start), 5*time.Second)
	r := q.RequireTask(t, shepherdtest.InState(queue.StateRetrying))
	assert.Equal(t, 1, r.Attempt)
	assert.True(t, strings.HasPrefix(r.Errors[0].Err, "down"), r.Errors[0].Err)
}
