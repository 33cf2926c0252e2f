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

// TestTenantTasksInEveryState: TenantTasks lists a tenant's tasks, and
// only its, in each state: waiting, delayed, retrying (kept in the
// per-tenant sets by the scripts that move tasks, emptied when they come
// due or are cancelled), in flight, done, cancelled and dead; and says
// ErrNotIndexed when the per-tenant sets miss a task (a task an earlier
// version delayed).
func TestTenantTasksInEveryState(t *testing.T) {
	t.Parallel()
	q := open(t, redistest.Name(t))
	ctx := testCtx(t, 20*time.Second)
	for _, ten := range []string{"a", "b"} {
		require.NoError(t, q.SetTenant(ctx, ten, 10))
	}
	release := make(chan struct{})
	t.Cleanup(func() { close(release) })
	serve(t, q, func(ctx context.Context, task *Task) ([]byte, error) {
		switch string(task.Payload) {
		case "block":
			select {
			case <-release:
			case <-ctx.Done():
			}
			return nil, nil
		case "retry":
			return nil, errors.New("again")
		case "dead":
			return nil, Permanent(errors.New("no"))
		}
		return nil, nil
	}, WithWorkers(4), WithBackoff(time.Hour, time.Hour))
	submit := func(id, ten, payload string, opts ...SubmitOption) *Future {
		f, err := q.Submit(ctx, []byte(payload), append(opts, WithTaskID(id), WithTenant(ten))...)
		require.NoError(t, err)
		return f
	}
	for _, ten := range []string{"a", "b"} {
		<-submit(ten+"-done", ten, "ok").Done()
		<-submit(ten+"-dead", ten, "dead").Done()
		submit(ten+"-delayed", ten, "ok", WithDelay(time.Hour))
		submit(ten+"-cancelled", ten, "ok", WithDelay(time.Hour))
		require.NoError(t, q.Cancel(ctx, ten+"-cancelled"))
		submit(ten+"-retry", ten, "retry")
		submit(ten+"-active", ten, "block")
		submit(ten+"-soon", ten, "ok", WithDelay(50*time.Millisecond)) // comes due: leaves the delayed set
	}
	ids := func(st State) []string {
		tasks, err := q.TenantTasks(ctx, "a", st, 0, 100)
		require.NoError(t, err, st)
		out := []string{}
		for _, tk := range tasks {
			out = append(out, tk.ID)
		}
		return out
	}
	require.Eventually(t, func() bool {
		return assert.ObjectsAreEqual([]string{"a-retry"}, ids(StateRetrying)) &&
			assert.ObjectsAreEqual([]string{"a-active"}, ids(StateActive)) &&
			assert.ObjectsAreEqual([]string{"a-delayed"}, ids(StateDelayed))
	}, 10*time.Second, 20*time.Millisecond, "retrying %v, in flight %v, delayed %v", ids(StateRetrying), ids(StateActive), ids(StateDelayed))
	require.Eventually(t, func() bool { return assert.ObjectsAreEqual([]string{"a-soon", "a-done"}, ids(StateDone)) },
		10*time.Second, 20*time.Millisecond, "done, newest first: %v", ids(StateDone))
	assert.Equal(t, []string{"a-dead"}, ids(StateDead))
	assert.Equal(t, []string{"a-cancelled"}, ids(StateCancelled))
	assert.Empty(t, ids(StateWaiting))
	for _, st := range []State{StateWaiting, StateDelayed, StateRetrying, StateActive, StateDead, StateDone, StateCancelled} {
		tasks, err := q.TenantTasks(ctx, "nobody", st, 0, 10)
		require.NoError(t, err)
		assert.Empty(t, tasks, st)
	}
	_, err := q.TenantTasks(ctx, "a", StateWaiting, -1, 10)
	assert.ErrorIs(t, err, ErrInvalidOption)

	// b's task that comes due has left the delayed set too (the test
	// waited for a's only: a CI run listed b-soon below).
	require.Eventually(t, func() bool {
		tasks, err := q.TenantTasks(ctx, "b", StateDelayed, 0, 10)
		return err == nil && len(tasks) == 1
	}, 10*time.Second, 20*time.Millisecond, "b-soon comes due")

	// A delayed task missing from its tenant's set, as an earlier
	// version queued it: not exact, so said so.
	require.NoError(t, q.rdb.ZRem(ctx, q.lay.tenantDelayed("b"), "b-delayed").Err())
	_, err = q.TenantTasks(ctx, "a", StateDelayed, 0, 10)
	assert.ErrorIs(t, err, ErrNotIndexed)
	n, err := q.Tasks(ctx, StateDelayed, 0, 10)
	require.NoError(t, err)
	assert.Len(t, n, 2, "Tasks lists them all still")
}
