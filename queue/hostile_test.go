package queue

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/shepherd-go/shepherd/internal/redistest"
)

func TestBadOpenIsRefusedAndWritesNothing(t *testing.T) {
	t.Parallel()
	name := redistest.Name(t)
	ctx := testCtx(t, 5*time.Second)
	var nilClient *redis.Client
	for _, tc := range []struct {
		desc string
		rdb  redis.UniversalClient
		name string
		opts []Option
	}{
		{"nil client", nil, name, nil},
		{"nil client pointer", nilClient, name, nil},
		{"empty name", srv.Client(), "", nil},
		{"name with }", srv.Client(), "a}b", nil},
		{"nil option", srv.Client(), name, []Option{nil}},
		{"nil logger", srv.Client(), name, []Option{WithLogger(nil)}},
		{"zero TTL", srv.Client(), name, []Option{WithTTL(0)}},
		{"TTL below the minimum", srv.Client(), name, []Option{WithTTL(10 * time.Millisecond)}},
		{"zero MaxQueued", srv.Client(), name, []Option{WithMaxQueued(0)}},
		{"negative MaxDeadLetters", srv.Client(), name, []Option{WithMaxDeadLetters(-1)}},
		{"zero MaxPayloadSize", srv.Client(), name, []Option{WithMaxPayloadSize(0)}},
		{"empty process name", srv.Client(), name, []Option{WithName("")}},
		{"long process name", srv.Client(), name, []Option{WithName(strings.Repeat("n", MaxNameSize+1))}},
		{"name with a newline", srv.Client(), name, []Option{WithName("a\nb")}},
		{"nil MeterProvider", srv.Client(), name, []Option{WithMeterProvider(nil)}},
		{"zero shards", srv.Client(), name, []Option{WithShards(0)}},
		{"too many shards", srv.Client(), name, []Option{WithShards(MaxShards + 1)}},
		{"name with #", srv.Client(), name + "#1", nil},
	} {
		_, err := Open(ctx, tc.rdb, tc.name, tc.opts...)
		assert.ErrorIs(t, err, ErrInvalidOption, tc.desc)
	}
	assert.Empty(t, redistest.Keys(t, srv.Client(), "*"+name+"*"), "a refused Open left keys")
}

func TestBadCallsAreRefusedAtOnceAndWriteNothing(t *testing.T) {
	t.Parallel()
	q := open(t, redistest.Name(t), WithMaxPayloadSize(100))
	ctx := testCtx(t, 5*time.Second)
	before := redistest.Keys(t, srv.Client(), q.lay.taskPrefix+"*")
	submits := []struct {
		desc    string
		payload []byte
		opts    []SubmitOption
		want    error
	}{
		{"huge payload", make([]byte, 101), nil, ErrPayloadTooLarge},
		{"nil option", nil, []SubmitOption{nil}, ErrInvalidOption},
		{"negative delay", nil, []SubmitOption{WithDelay(-time.Second)}, ErrInvalidOption},
		{"zero due time", nil, []SubmitOption{WithDueAt(time.Time{})}, ErrInvalidOption},
		{"zero attempts", nil, []SubmitOption{WithMaxAttempts(0)}, ErrInvalidOption},
		{"too many attempts", nil, []SubmitOption{WithMaxAttempts(MaxAttempts + 1)}, ErrInvalidOption},
		{"zero timeout", nil, []SubmitOption{WithTimeout(0)}, ErrInvalidOption},
		{"negative timeout", nil, []SubmitOption{WithTimeout(-time.Second)}, ErrInvalidOption},
		{"zero retention", nil, []SubmitOption{WithRetention(0)}, ErrInvalidOption},
		{"empty id", nil, []SubmitOption{WithTaskID("")}, ErrInvalidOption},
		{"huge id", nil, []SubmitOption{WithTaskID(strings.Repeat("x", MaxTaskIDSize+1))}, ErrInvalidOption},
	}
	for _, tc := range submits {
		f, err := q.Submit(ctx, tc.payload, tc.opts...)
		assert.ErrorIs(t, err, tc.want, tc.desc)
		assert.Nil(t, f, tc.desc)
	}
	_, err := q.Serve(nil)
	assert.ErrorIs(t, err, ErrInvalidOption)
	_, err = ServeWith[int](nil, Resource[int]{}, func(context.Context, int, *Task) ([]byte, error) { return nil, nil })
	assert.ErrorIs(t, err, ErrInvalidOption)
	for _, o := range []ServeOption{nil, WithWorkers(0), WithBackoff(0, time.Second), WithBackoff(time.Second, time.Millisecond),
		WithPrefetch(-1), WithPrefetch(MaxPrefetch + 1)} {
		_, err = q.Serve(echo, o)
		assert.ErrorIs(t, err, ErrInvalidOption)
	}
	_, err = q.DeadLetters(ctx, -1, 10)
	assert.ErrorIs(t, err, ErrInvalidOption)
	_, err = q.DeadLetters(ctx, 0, 0)
	assert.ErrorIs(t, err, ErrInvalidOption)
	_, err = q.Inspect(ctx, "")
	assert.ErrorIs(t, err, ErrInvalidOption)
	_, err = q.Result(ctx, "")
	assert.ErrorIs(t, err, ErrInvalidOption)
	assert.ErrorIs(t, q.Cancel(ctx, ""), ErrInvalidOption)
	assert.ErrorIs(t, q.Replay(ctx, ""), ErrInvalidOption)
	assert.Equal(t, before, redistest.Keys(t, srv.Client(), q.lay.taskPrefix+"*"), "a refused call wrote a task")
	st, err := q.Stats(ctx)
	require.NoError(t, err)
	assert.Zero(t, st.Available+st.Delayed)

	s := serve(t, q, echo, WithWorkers(1))
	_, err = q.Serve(echo)
	assert.ErrorIs(t, err, ErrAlreadyServing)
	require.NoError(t, s.Stop(ctx))
}

func TestCallsAfterCloseFailWithErrClosed(t *testing.T) {
	t.Parallel()
	ctx := testCtx(t, 5*time.Second)
	q, err := Open(ctx, srv.Client(), redistest.Name(t))
	require.NoError(t, err)
	// A future still pending when its Queue closes fails with ErrClosed.
	f, err := q.Submit(ctx, nil)
	require.NoError(t, err)
	require.NoError(t, q.Close(ctx))
	require.NoError(t, q.Close(ctx), "Close is idempotent")
	_, err = f.Wait(ctx)
	assert.ErrorIs(t, err, ErrClosed)
	_, err = q.Submit(ctx, nil)
	assert.ErrorIs(t, err, ErrClosed)
	_, err = q.Serve(echo)
	assert.ErrorIs(t, err, ErrClosed)
	// The task itself is still queued: any process can run it.
	info, err := q.Inspect(ctx, f.ID())
	require.NoError(t, err)
	assert.Equal(t, StateWaiting, info.State)
}
