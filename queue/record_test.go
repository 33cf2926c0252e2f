package queue

import (
	"context"
	"errors"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/shepherd-go/shepherd/internal/redistest"
)

// An unfinished task is a record in its shard's tasks hash, not a key of
// its own: written by Submit, changed by a failed attempt, moved into a
// hash of its own when it finishes (without its payload and submitter,
// which a dead letter keeps).
func TestAnUnfinishedTaskIsARecord(t *testing.T) {
	t.Parallel()
	q := open(t, redistest.Name(t))
	ctx := testCtx(t, 20*time.Second)
	require.NoError(t, q.SetTenant(ctx, "acme", 4))
	f, err := q.Submit(ctx, []byte("pay\x00load"), WithTenant("acme"), WithPriority(2), WithMaxAttempts(2),
		WithRetention(time.Hour), WithDedup("k", time.Hour))
	require.NoError(t, err)
	dead, err := q.Submit(ctx, []byte("doomed"), WithMaxAttempts(1))
	require.NoError(t, err)

	for _, id := range []string{f.ID(), dead.ID()} {
		assert.Zero(t, q.rdb.Exists(ctx, q.lay.task(id)).Val(), "an unfinished task has no key of its own")
	}
	rec := storedTask(t, ctx, q.rdb, q.lay, f.ID())
	assert.Equal(t, map[string]string{fieldState: "waiting", fieldPayload: "pay\x00load", fieldSubmitter: q.proc,
		fieldSubmitted: rec[fieldSubmitted], fieldTenant: "acme", fieldPriority: "2", fieldMaxAttempts: "2",
		fieldRetention: "3600000", fieldDedupKey: "k"}, rec)
	info, err := q.Inspect(ctx, f.ID())
	require.NoError(t, err)
	assert.Equal(t, StateWaiting, info.State)
	assert.Equal(t, "acme", info.Tenant)
	assert.Equal(t, 2, info.Priority)
	listed, err := q.Tasks(ctx, StateWaiting, 0, 10)
	require.NoError(t, err)
	assert.Len(t, listed, 2)

	// The first attempt fails: the record keeps its error for the next.
	var calls atomic.Int32
	retried := make(chan struct{})
	serve(t, q, func(_ context.Context, task *Task) ([]byte, error) {
		if task.ID == dead.ID() {
			return nil, errors.New("no")
		}
		if calls.Add(1) == 1 {
			return nil, errors.New("first")
		}
		<-retried
		return []byte("ok"), nil
	}, WithWorkers(2), WithBackoff(10*time.Millisecond, 10*time.Millisecond))
	require.Eventually(t, func() bool {
		return storedTask(t, ctx, q.rdb, q.lay, f.ID())[fieldAttempts] == "1" && calls.Load() == 2
	}, 5*time.Second, 5*time.Millisecond)
	rec = storedTask(t, ctx, q.rdb, q.lay, f.ID())
	assert.Equal(t, "waiting", rec[fieldState])
	assert.Contains(t, rec[fieldErrors], "first")
	close(retried)
	res, err := wait(t, f, 5*time.Second)
	require.NoError(t, err)
	assert.Equal(t, "ok", string(res))
	_, err = wait(t, dead, 5*time.Second)
	require.Error(t, err)

	assert.Zero(t, records(t, ctx, q.rdb, q.lay), "finished tasks left tasks")
	out := q.rdb.HGetAll(ctx, q.lay.task(f.ID())).Val()
	assert.Equal(t, "done", out[fieldState])
	assert.Equal(t, "2", out[fieldAttempts])
	assert.Equal(t, "acme", out[fieldTenant])
	assert.Contains(t, out[fieldErrors], "first")
	assert.NotContains(t, out, fieldPayload)
	assert.NotContains(t, out, fieldSubmitter)
	ttl := q.rdb.PTTL(ctx, q.lay.task(f.ID())).Val()
	assert.InDelta(t, time.Hour.Seconds(), ttl.Seconds(), 60)
	letter := q.rdb.HGetAll(ctx, q.lay.task(dead.ID())).Val()
	assert.Equal(t, "dead", letter[fieldState])
	assert.Equal(t, "doomed", letter[fieldPayload], "a dead letter keeps its payload, for Replay")
	assert.Equal(t, q.proc, letter[fieldSubmitter])

	// Replayed (the queue paused, so that it stays waiting), the letter is
	// a record again.
	require.NoError(t, q.Pause(ctx))
	require.NoError(t, q.Replay(ctx, dead.ID()))
	assert.Zero(t, q.rdb.Exists(ctx, q.lay.task(dead.ID())).Val())
	rec = storedTask(t, ctx, q.rdb, q.lay, dead.ID())
	assert.Equal(t, "doomed", rec[fieldPayload])
	assert.NotContains(t, rec, fieldErrors)
	assert.NotContains(t, rec, fieldFinished)
}

// Tasks an earlier version queued, each a hash of its own, are read and
// run: waiting, delayed and retrying ones are taken, one is cancelled,
// one withdrawn, and a caller's id among them is known to Submit. They
// stay hashes of their own (as a task with a large payload is).
func TestTasksAnEarlierVersionQueued(t *testing.T) {
	t.Parallel()
	q := open(t, redistest.Name(t))
	ctx := testCtx(t, 20*time.Second)
	w, err := q.Submit(ctx, []byte("w"), WithTaskID("w"))
	require.NoError(t, err)
	d, err := q.Submit(ctx, []byte("d"), WithDelay(200*time.Millisecond))
	require.NoError(t, err)
	r, err := q.Submit(ctx, []byte("r"), WithDelay(time.Hour))
	require.NoError(t, err)
	c, err := q.Submit(ctx, []byte("c"))
	require.NoError(t, err)
	x, err := q.Submit(ctx, []byte("x"), WithTaskID("x"))
	require.NoError(t, err)
	for _, f := range []*Future{w, d, c, x} {
		toEarlierLayout(t, ctx, q.rdb, q.lay, f.ID())
	}
	// r: retrying after a first failed attempt, as the earlier version
	// stored it.
	due := time.Now().Add(100 * time.Millisecond).UnixMilli()
	toEarlierLayout(t, ctx, q.rdb, q.lay, r.ID(), fieldState, "retry", fieldAttempts, "1", fieldDue, due,
		fieldErrors, `[{"a":1,"e":"first","t":1}]`)
	require.NoError(t, q.rdb.ZRem(ctx, q.lay.delayed, r.ID()).Err())
	require.NoError(t, q.rdb.ZAdd(ctx, q.lay.retry, redis.Z{Score: float64(due), Member: r.ID()}).Err())
	assert.Zero(t, records(t, ctx, q.rdb, q.lay))

	info, err := q.Inspect(ctx, r.ID())
	require.NoError(t, err)
	assert.Equal(t, StateRetrying, info.State)
	assert.Equal(t, 1, info.Attempt)
	_, err = q.Submit(ctx, []byte("again"), WithTaskID("w"))
	assert.ErrorIs(t, err, ErrDuplicateTask, "the earlier version's task w is known")
	require.NoError(t, q.Cancel(ctx, c.ID()))
	info, err = q.Inspect(ctx, c.ID())
	require.NoError(t, err)
	assert.Equal(t, StateCancelled, info.State)
	nonce := storedTask(t, ctx, q.rdb, q.lay, "x")[fieldNonce]
	require.NotEmpty(t, nonce)
	res, err := withdrawScript.Run(ctx, q.rdb, q.lay.common(), q.lay.commonArgs("x", nonce, withdrawnTTL.Milliseconds())...).Result()
	require.NoError(t, err)
	assert.Equal(t, "WITHDRAWN", res)
	assert.Zero(t, q.rdb.Exists(ctx, q.lay.task("x")).Val(), "withdrawn: gone")

	serve(t, q, func(_ context.Context, task *Task) ([]byte, error) {
		return []byte(string(task.Payload) + "#" + string(rune('0'+task.Attempt))), nil
	}, WithWorkers(2))
	for f, want := range map[*Future]string{w: "w#1", d: "d#1", r: "r#2"} {
		res, err := wait(t, f, 5*time.Second)
		require.NoError(t, err, f.ID())
		assert.Equal(t, want, string(res))
		out := q.rdb.HGetAll(ctx, q.lay.task(f.ID())).Val()
		assert.Equal(t, "done", out[fieldState])
		assert.NotContains(t, out, fieldPayload)
	}
	assert.Contains(t, q.rdb.HGet(ctx, q.lay.task(r.ID()), fieldErrors).Val(), "first", "its first attempt's error is kept")
	assert.Zero(t, records(t, ctx, q.rdb, q.lay))
	st, err := q.Stats(ctx)
	require.NoError(t, err)
	assert.Zero(t, st.Available+st.Delayed+st.Retrying+st.InFlight)
}

// A task whose payload is over recordMaxPayload is a hash of its own,
// and stays one: through a failed attempt, its success, and a dead
// letter's Replay; one at the limit is a record.
func TestALargePayloadKeepsAHashOfItsOwn(t *testing.T) {
	t.Parallel()
	q := open(t, redistest.Name(t))
	ctx := testCtx(t, 20*time.Second)
	large := []byte(strings.Repeat("L", recordMaxPayload+1))
	f, err := q.Submit(ctx, large)
	require.NoError(t, err)
	dead, err := q.Submit(ctx, append([]byte("dead"), large...), WithMaxAttempts(1))
	require.NoError(t, err)
	small, err := q.Submit(ctx, large[:recordMaxPayload])
	require.NoError(t, err)
	for id, size := range map[string]int{f.ID(): len(large), dead.ID(): len(large) + 4} {
		assert.False(t, q.rdb.HExists(ctx, q.lay.tasksOf(id), id).Val(), "no record")
		stored := q.rdb.HGetAll(ctx, q.lay.task(id)).Val()
		assert.Equal(t, "waiting", stored[fieldState])
		assert.Len(t, stored[fieldPayload], size)
	}
	assert.True(t, q.rdb.HExists(ctx, q.lay.tasksOf(small.ID()), small.ID()).Val(), "a payload at the limit is a record")

	var calls atomic.Int32
	serve(t, q, func(_ context.Context, task *Task) ([]byte, error) {
		if task.ID == dead.ID() || task.ID == f.ID() && calls.Add(1) == 1 {
			return nil, errors.New("no")
		}
		return []byte(strings.Repeat("r", len(task.Payload)%7)), nil
	}, WithWorkers(2), WithBackoff(10*time.Millisecond, 10*time.Millisecond))
	_, err = wait(t, f, 5*time.Second)
	require.NoError(t, err)
	_, err = wait(t, small, 5*time.Second)
	require.NoError(t, err)
	_, err = wait(t, dead, 5*time.Second)
	require.Error(t, err)
	out := q.rdb.HGetAll(ctx, q.lay.task(f.ID())).Val()
	assert.Equal(t, "done", out[fieldState])
	assert.Equal(t, "2", out[fieldAttempts])
	assert.Contains(t, out[fieldErrors], "no")
	assert.NotContains(t, out, fieldPayload)
	assert.Zero(t, records(t, ctx, q.rdb, q.lay))

	require.NoError(t, q.Pause(ctx))
	require.NoError(t, q.Replay(ctx, dead.ID()))
	assert.False(t, q.rdb.HExists(ctx, q.lay.tasksOf(dead.ID()), dead.ID()).Val())
	stored := q.rdb.HGetAll(ctx, q.lay.task(dead.ID())).Val()
	assert.Equal(t, "waiting", stored[fieldState])
	assert.NotContains(t, stored, fieldErrors)
	info, err := q.Inspect(ctx, dead.ID())
	require.NoError(t, err)
	assert.Equal(t, StateWaiting, info.State)
}

// decodeRecord reads what the scripts' cmsgpack writes, and the payload
// after it: strings of each length class, binary bytes, and numbers as
// decimal text; it refuses what does not start with a map of strings.
func TestDecodeRecord(t *testing.T) {
	t.Parallel()
	ctx := testCtx(t, 5*time.Second)
	rdb := srv.Client()
	long := strings.Repeat("y", 300)
	huge := strings.Repeat("z", 70000)
	packed, err := rdb.Eval(ctx, `return cmsgpack.pack({a = 'x', b = ARGV[1], c = ARGV[2], d = '', e = 'n\0l\n',
		f = 7, g = -3, h = 1764300000000, i = -200, j = 70000, k = 2.5, m = string.rep('w', 40)}) .. 'pay\0load'`, nil, long, huge).Text()
	require.NoError(t, err)
	m, err := decodeRecord(packed)
	require.NoError(t, err)
	assert.Equal(t, map[string]string{"a": "x", "b": long, "c": huge, "d": "", "e": "n\x00l\n", "f": "7", "g": "-3",
		"h": "1764300000000", "i": "-200", "j": "70000", "k": "2.5", "m": strings.Repeat("w", 40), "p": "pay\x00load"}, m)

	for _, bad := range []string{"", "\x91\xa1a", "\x81\xa1a", "\x81\xa1a\xa3ab", "\x81\xc0\xa1a"} {
		_, err := decodeRecord(bad)
		assert.ErrorIs(t, err, errRecord, "%q", bad)
	}
}
