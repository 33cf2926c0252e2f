package pool

import (
	"context"
	"strconv"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/shepherd-go/shepherd/internal/redistest"
	"github.com/shepherd-go/shepherd/internal/streamfields"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// A start event delivered again (a recovery path, a reclaimed entry) must
// neither start the job a second time nor, failing, delete its state.
func TestRepeatedAndStaleStartEventsAreNoOps(t *testing.T) {
	t.Parallel()
	n := addNode(t, srv.Client(), redistest.Name(t))
	rec := newRecorder()
	ws := addWorkers(t, n, rec, 1)
	ctx := testCtx(t, 20*time.Second)
	require.NoError(t, n.DispatchJob(ctx, "k", nil))
	raw, err := srv.Client().HGet(ctx, n.lay.jobs, "k").Result()
	require.NoError(t, err)

	// Replay the worker's start event for the running job (same nonce and
	// generation), as a router sends it and as an admission that claimed
	// it does (fresh: no claim), and one with an older generation, then
	// make its Start fail if it ever runs again.
	rec.mu.Lock()
	rec.failKeys["k"] = true
	rec.mu.Unlock()
	var nonce string
	_, err = recordNonce(raw, &nonce)
	require.NoError(t, err)
	for i, gen := range []int64{1, 1, 0} {
		h := header{nonce: nonce, gen: gen, replyTo: noReply, reqID: noReply}
		p := h.String()
		if i == 1 {
			p += "\n" + strconv.FormatInt(time.Now().UnixMilli(), 10) + " \n"
		}
		require.NoError(t, srv.Client().XAdd(ctx, &redis.XAddArgs{
			Stream: ws[0].stream.Key(),
			Values: []any{streamfields.Event, evStart, streamfields.Topic, "k", streamfields.Payload, p},
		}).Err())
	}
	// A marker job dispatched afterwards proves the worker handled both.
	rec.mu.Lock()
	delete(rec.failKeys, "marker")
	rec.mu.Unlock()
	require.NoError(t, n.DispatchJob(ctx, "marker", nil))

	rec.mu.Lock()
	assert.Equal(t, 1, rec.starts["k"], "a repeated start of an owned job is a no-op")
	rec.mu.Unlock()
	after, err := srv.Client().HGet(ctx, n.lay.jobs, "k").Result()
	require.NoError(t, err, "the running job's record survived")
	assert.Equal(t, raw, after)
	assert.Equal(t, 1, rec.runningKeys()["k"])
}

func TestTwoPoolsOnOneRedisShareNothing(t *testing.T) {
	t.Parallel()
	a := addNode(t, srv.Client(), redistest.Name(t))
	b := addNode(t, srv.Client(), redistest.Name(t))
	ra, rb := newRecorder(), newRecorder()
	addWorkers(t, a, ra, 1)
	addWorkers(t, b, rb, 1)
	ctx := testCtx(t, 20*time.Second)
	require.NoError(t, a.DispatchJob(ctx, "same-key", []byte("a")))
	require.NoError(t, b.DispatchJob(ctx, "same-key", []byte("b")), "the same key in another pool is another job")
	assert.Equal(t, map[string]int{"same-key": 1}, ra.runningKeys())
	assert.Equal(t, map[string]int{"same-key": 1}, rb.runningKeys())
	for _, k := range poolKeys(t, a) {
		assert.Contains(t, k, "{"+a.PoolName()+"}", "every key carries its pool's hash tag")
	}
	require.NoError(t, b.Shutdown(ctx))
	assert.Equal(t, map[string]int{"same-key": 1}, ra.runningKeys(), "shutting one pool down leaves the other alone")
	keys, err := a.JobKeys(ctx)
	require.NoError(t, err)
	assert.Equal(t, []string{"same-key"}, keys)
}

func TestCloseDoesNotWaitForBlockingReads(t *testing.T) {
	t.Parallel()
	n, err := AddNode(testCtx(t, 10*time.Second), srv.NewClient(), redistest.Name(t),
		fastOpts(WithJobSinkBlockDuration(30*time.Second))...)
	require.NoError(t, err)
	addWorkers(t, n, newRecorder(), 2)
	start := time.Now()
	require.NoError(t, n.Close(context.Background()))
	assert.Less(t, time.Since(start), 2*time.Second, "Close waited for a blocking read")
}
