package queue

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/shepherd-go/shepherd/internal/keys"
	"github.com/shepherd-go/shepherd/internal/redistest"
)

// queueKeys counts the keys of queue name's shards (n of them) on the
// test Redis.
func queueKeys(t *testing.T, ctx context.Context, name string, n int) int {
	t.Helper()
	total := 0
	for i := range n {
		sp, err := keys.New(shardName(name, i))
		require.NoError(t, err)
		ks, err := srv.Client().Keys(ctx, sp.KindPattern(keys.KindQueue)).Result()
		require.NoError(t, err)
		total += len(ks)
	}
	return total
}

// Delete removes every key of a queue of three shards (tasks in every
// state, a tenant, a schedule, a dead letter, results), refuses while a
// process has it open, keeps a same-named pool's keys, and leaves a
// queue that opens again empty.
func TestDeleteRemovesEveryKeyOfTheQueue(t *testing.T) {
	t.Parallel()
	name := redistest.Name(t)
	ctx := testCtx(t, 30*time.Second)
	q, err := Open(ctx, srv.Client(), name, WithShards(3))
	require.NoError(t, err)
	require.NoError(t, q.SetTenant(ctx, "acme", 5))
	require.NoError(t, q.SetSchedule(ctx, "nightly", "@daily", []byte("n")))
	_, err = q.Serve(func(ctx context.Context, t *Task) ([]byte, error) {
		if string(t.Payload) == "bad" {
			return nil, Permanent(errors.New("bad"))
		}
		return []byte("ok"), nil
	}, WithWorkers(2))
	require.NoError(t, err)
	for i, p := range []string{"good", "bad", "good"} {
		opts := []SubmitOption{}
		if i == 2 {
			opts = append(opts, WithTenant("acme"))
		}
		f, err := q.Submit(ctx, []byte(p), opts...)
		require.NoError(t, err)
		_, _ = f.Wait(ctx)
	}
	for range 5 {
		_, err := q.Submit(ctx, []byte("later"), WithDelay(time.Hour))
		require.NoError(t, err)
	}
	pool := "shepherd:{" + name + "}:pool:settings" // a pool of the same name
	require.NoError(t, srv.Client().Set(ctx, pool, "kept", 0).Err())

	c, err := NewClient(srv.Client(), name)
	require.NoError(t, err)
	before := queueKeys(t, ctx, name, 3)
	require.Greater(t, before, 10)
	n, err := c.Delete(ctx)
	require.ErrorIs(t, err, ErrInUse)
	assert.Zero(t, n)
	assert.Equal(t, before, queueKeys(t, ctx, name, 3), "a refused Delete removed keys")

	require.NoError(t, q.Close(ctx))
	before = queueKeys(t, ctx, name, 3)
	n, err = c.Delete(ctx)
	require.NoError(t, err)
	assert.Equal(t, before, n)
	assert.Zero(t, queueKeys(t, ctx, name, 3), "keys left")
	assert.Equal(t, "kept", srv.Client().Get(ctx, pool).Val(), "a same-named pool's key was removed")
	exists, err := c.Exists(ctx)
	require.NoError(t, err)
	assert.False(t, exists)
	n, err = c.Delete(ctx)
	require.NoError(t, err)
	assert.Zero(t, n, "a second Delete finds nothing")

	q2 := open(t, name)
	st, err := q2.Stats(ctx)
	require.NoError(t, err)
	assert.Zero(t, st.Dead+st.Delayed+st.Available)
	assert.Empty(t, st.Tenants)
}

// DeleteEvenIfLive deletes a queue a process has open.
func TestDeleteEvenIfLive(t *testing.T) {
	t.Parallel()
	name := redistest.Name(t)
	ctx := testCtx(t, 30*time.Second)
	q := open(t, name)
	_, err := q.Submit(ctx, nil, WithDelay(time.Hour))
	require.NoError(t, err)
	c, err := NewClient(srv.Client(), name)
	require.NoError(t, err)
	n, err := c.Delete(ctx, DeleteEvenIfLive())
	require.NoError(t, err)
	assert.Positive(t, n)
	st, err := c.Stats(ctx)
	require.NoError(t, err)
	assert.Zero(t, st.Delayed, "the delayed task is gone")
}
