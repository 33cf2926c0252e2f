package queue

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/shepherd-go/shepherd/internal/taskkit"
)

// The test kit's run classifies an attempt's end as a worker does
// (Server.classify): a change to one must be made to the other.
func TestTestKitClassifiesAsAWorker(t *testing.T) {
	t.Parallel()
	const maxSize = 8
	s := &Server{q: &Queue{cfg: config{maxPayloadSize: maxSize}}, cfg: defaultServeConfig()}
	boom := errors.New("boom")
	cases := []struct {
		name string
		res  []byte
		err  error
	}{
		{"success", []byte("ok"), nil},
		{"result too large", []byte("123456789"), nil},
		{"error", nil, boom},
		{"permanent", nil, Permanent(boom)},
		{"wrapped permanent", nil, errors.Join(errors.New("ctx"), Permanent(boom))},
		{"retry later", nil, RetryLater(time.Minute, boom)},
		{"retry later, under 1ms", nil, RetryLater(0, boom)},
	}
	for _, c := range cases {
		task := &Task{ID: "t", Attempt: 1, MaxAttempts: 3}
		kind, _, delay := s.classify(task, c.res, c.err, false, false, false, time.Millisecond)
		e := runAlone(context.Background(), Handler(func(context.Context, *Task) ([]byte, error) { return c.res, c.err }),
			taskkit.Spec{ID: "t", Attempt: 1, MaxAttempts: 3, Timeout: time.Minute, MaxResultSize: maxSize})
		assert.Equal(t, kind, e.Kind, c.name)
		if kind == "later" {
			assert.Equal(t, delay, e.Delay, c.name)
		}
	}
}

// The task the kit runs carries the spec, its ctx the timeout, and its
// Progress goes to the spec's function after the usual checks.
func TestTestKitRunsARealTask(t *testing.T) {
	t.Parallel()
	var reports []float64
	var got *Task
	var left time.Duration
	e := runAlone(context.Background(), Handler(func(ctx context.Context, task *Task) ([]byte, error) {
		got = task
		d, _ := ctx.Deadline()
		left = time.Until(d)
		if err := task.Progress(ctx, 2, "two"); err != nil {
			return nil, err
		}
		require.ErrorIs(t, task.Progress(ctx, 1, string(make([]byte, MaxProgressMessage+1))), ErrInvalidOption)
		return []byte("r"), nil
	}), taskkit.Spec{ID: "id", Payload: []byte("p"), Attempt: 2, MaxAttempts: 5, Tenant: "acme", Timeout: time.Hour,
		MaxResultSize: 10, Progress: func(_ context.Context, v float64, _ string) error {
			reports = append(reports, v)
			return nil
		}})
	require.NoError(t, e.Err)
	assert.Equal(t, "ok", e.Kind)
	assert.Equal(t, "r", string(e.Result))
	assert.Equal(t, Task{ID: "id", Payload: []byte("p"), Attempt: 2, MaxAttempts: 5, Tenant: "acme"},
		Task{ID: got.ID, Payload: got.Payload, Attempt: got.Attempt, MaxAttempts: got.MaxAttempts, Tenant: got.Tenant})
	assert.Equal(t, time.Hour, got.timeout)
	assert.InDelta(t, time.Hour.Seconds(), left.Seconds(), 1)
	assert.Equal(t, []float64{2}, reports)
}
