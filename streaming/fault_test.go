package streaming

import (
	"errors"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/shepherd-go/shepherd/internal/redistest"
	"github.com/shepherd-go/shepherd/internal/redisutil"
)

// Redis restarts without persistence: stream and group are gone. The sink
// recreates the group, reports it, and later entries flow (a consumer must
// not starve on NOGROUP: docs/ARCHITECTURE.md, failure modes: 2).
func TestSinkRecoversFromRedisRestartWithoutData(t *testing.T) {
	t.Parallel()
	ctx := testCtx(t)
	server := ownServer(t)
	s := newStream(t, server.Client())
	var log errorLog
	sink := newSink(t, s, "g", WithErrorHook(log.hook), WithAckGracePeriod(time.Second))
	r, err := NewReader(ctx, s, WithBlockDuration(200*time.Millisecond), WithBackoff(10*time.Millisecond, 100*time.Millisecond))
	require.NoError(t, err)
	defer func() { require.NoError(t, r.Close(ctx)) }()

	addN(t, s, 1)
	require.NoError(t, sink.Ack(ctx, recv(t, sink.Subscribe(), 5*time.Second)))
	recv(t, r.Subscribe(), 5*time.Second)

	require.NoError(t, server.Kill())
	require.NoError(t, server.Restart())

	// Adds may fail while clients reconnect; the data is gone either way.
	var ids []string
	require.Eventually(t, func() bool {
		id, err := s.Add(ctx, "after", []byte("restart"))
		if err == nil {
			ids = append(ids, id)
		}
		return err == nil
	}, 10*time.Second, 20*time.Millisecond)
	ev := recv(t, sink.Subscribe(), 10*time.Second)
	assert.Equal(t, ids[0], ev.ID)
	require.NoError(t, sink.Ack(ctx, ev))
	assert.Equal(t, ids[0], recv(t, r.Subscribe(), 10*time.Second).ID, "the reader resumes too")

	waitDialersGone(t)
	require.Eventually(t, func() bool {
		for _, err := range log.all() {
			if errors.Is(err, ErrGroupRecreated) {
				return true
			}
		}
		return false
	}, 5*time.Second, 10*time.Millisecond, "group recreation was not reported: %v", log.all())
}

// The group is destroyed under a running sink (XGROUP DESTROY, or a
// FLUSHDB): it is recreated and nothing added afterwards is lost.
func TestSinkRecreatesDestroyedGroup(t *testing.T) {
	t.Parallel()
	ctx := testCtx(t)
	s := newStream(t, nil)
	var recreated atomic.Int32
	sink := newSink(t, s, "g", WithErrorHook(func(err error) {
		if errors.Is(err, ErrGroupRecreated) {
			recreated.Add(1)
		}
	}))
	addN(t, s, 1)
	require.NoError(t, sink.Ack(ctx, recv(t, sink.Subscribe(), 5*time.Second)))
	require.NoError(t, srv.Client().Del(ctx, s.Key()).Err())
	require.Eventually(t, func() bool { return recreated.Load() > 0 }, 5*time.Second, 5*time.Millisecond)
	ids := addN(t, s, 2)
	evs := recvN(t, sink.Subscribe(), 2, 5*time.Second)
	assert.Equal(t, ids, []string{evs[0].ID, evs[1].ID})
}

// Redis is gone for good: the loops report errors at a bounded rate (no
// spinning), keep trying, and Close still returns promptly.
func TestReadErrorsBackOffAndNeverSpin(t *testing.T) {
	t.Parallel()
	ctx := testCtx(t)
	server := ownServer(t)
	s := newStream(t, server.Client())
	var errs atomic.Int32
	hook := func(error) { errs.Add(1) }
	sink, err := NewSink(ctx, s, "g", WithErrorHook(hook), WithBackoff(20*time.Millisecond, 80*time.Millisecond),
		WithAckGracePeriod(400*time.Millisecond))
	require.NoError(t, err)
	r, err := NewReader(ctx, s, WithErrorHook(hook), WithBackoff(20*time.Millisecond, 80*time.Millisecond))
	require.NoError(t, err)
	require.NoError(t, server.Kill())

	start := time.Now()
	require.Eventually(t, func() bool { return errs.Load() >= 6 }, 5*time.Second, 5*time.Millisecond,
		"errors are not reported")
	observed := time.Since(start)
	n := errs.Load()
	// Backoff starts at 20ms and doubles to 80ms: over the observed time
	// each of the three loops reports at most once per ~16ms (20ms minus
	// jitter), plus one each at once.
	limit := int32(3 + 3*observed/(16*time.Millisecond))
	assert.LessOrEqual(t, n, limit, "%d errors in %v: the loops spin", n, observed)

	start = time.Now()
	closeErr := sink.Close(ctx)
	require.Error(t, closeErr, "Close reports that it could not clean up in Redis")
	require.NoError(t, r.Close(ctx))
	assert.Less(t, time.Since(start), 2*time.Second)

	// Bring Redis back so that go-redis's dial probes succeed and end.
	require.NoError(t, server.Restart())
	waitDialersGone(t)
}

// A read's error keeps the dedicated connection only when it says the
// connection works: not when it comes from a server that turned replica
// (READONLY; UNBLOCKED), where the connection stays after a failover
// while the client's new connections go to the new master.
func TestReadErrorsThatDropTheDedicatedConnection(t *testing.T) {
	t.Parallel()
	ctx := testCtx(t)
	primary := ownServer(t)
	repl := redistest.StartReplicaOf(t, primary)
	readGroup := func(c redis.UniversalClient) error {
		return c.XReadGroup(ctx, &redis.XReadGroupArgs{Group: "g", Consumer: "c", Streams: []string{"s", ">"}, Count: 1}).Err()
	}
	nogroup := readGroup(primary.Client())
	require.Error(t, nogroup)
	assert.True(t, fine(nogroup), "NOGROUP: the connection works")
	readonly := readGroup(repl.Client())
	require.Error(t, readonly)
	assert.Equal(t, "READONLY", redisutil.ErrorCode(readonly))
	assert.False(t, fine(readonly), "READONLY: the connection is to a replica")
	closed := redis.NewClient(&redis.Options{Addr: primary.Addr()})
	require.NoError(t, closed.Close())
	assert.False(t, fine(readGroup(closed)), "a client error is no reply")
	assert.False(t, fine(errors.New("broken pipe")))
}
