package pool

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/shepherd-go/shepherd/internal/redistest"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// hangingNotify is a recorder whose HandleNotification reports that it
// was called and then hangs until its ctx ends.
type hangingNotify struct {
	*recorder
	entered chan string
}

func (h *hangingNotify) HandleNotification(ctx context.Context, key string, _ []byte) error {
	h.entered <- key
	<-ctx.Done()
	return ctx.Err()
}

// A NotifyWorker whose worker dies while handling it returns ErrNoWorker
// once the pool declares the worker dead, not when its own ctx ends.
func TestNotifyReturnsWhenItsWorkerDies(t *testing.T) {
	t.Parallel()
	pool := redistest.Name(t)
	victim := addNode(t, srv.NewClient(), pool)
	addNode(t, srv.NewClient(), pool) // a full node without workers: runs the janitor
	client := addNode(t, srv.NewClient(), pool, WithClientOnly())
	h := &hangingNotify{recorder: newRecorder(), entered: make(chan string, 1)}
	addWorkers(t, victim, h, 1)
	ctx := testCtx(t, 30*time.Second)
	require.NoError(t, client.DispatchJob(ctx, "k", nil))

	done := make(chan error, 1)
	began := time.Now()
	go func() { done <- client.NotifyWorker(ctx, "k", []byte("hello")) }()
	select {
	case <-h.entered:
	case <-ctx.Done():
		t.Fatal("the notification never reached the handler")
	}
	victim.crash()
	select {
	case err := <-done:
		require.ErrorIs(t, err, ErrNoWorker)
		assert.False(t, errors.Is(err, context.DeadlineExceeded))
		t.Logf("NotifyWorker returned %v after %v (WorkerTTL 1s)", err, time.Since(began))
	case <-ctx.Done():
		t.Fatal("NotifyWorker waited for its ctx although its worker died")
	}
}

// A StopJob whose stop event the worker never read (it left with the
// event unread) is answered by the worker's leaving, which stops the job
// on its way out.
func TestStopJobAnsweredWhenItsWorkerLeavesWithTheStopUnread(t *testing.T) {
	t.Parallel()
	n := addNode(t, srv.Client(), redistest.Name(t))
	rec := newRecorder()
	ws := addWorkers(t, n, rec, 1)
	ctx := testCtx(t, 30*time.Second)
	require.NoError(t, n.DispatchJob(ctx, "k", nil))

	// Stop reading the worker's stream: the stop event stays unread.
	w := ws[0]
	n.inboxMu.Lock()
	delete(n.inboxes, w.stream.Name())
	n.inboxMu.Unlock()
	require.NoError(t, n.inbox.Remove(ctx, w.stream))

	done := make(chan error, 1)
	go func() { done <- n.StopJob(ctx, "k") }()
	require.Eventually(t, func() bool {
		return recordState(ctx, n, "k") == "x"
	}, 10*time.Second, 5*time.Millisecond, "the stop was never sent")
	require.NoError(t, n.RemoveWorker(ctx, w))
	select {
	case err := <-done:
		require.NoError(t, err)
	case <-ctx.Done():
		t.Fatal("StopJob waited for its ctx although the worker left")
	}
	assert.Empty(t, rec.runningKeys(), "the job was stopped on the way out")
	keys, err := n.JobKeys(ctx)
	require.NoError(t, err)
	assert.Empty(t, keys)
}

// recordState returns the state field of key's job record, or "".
func recordState(ctx context.Context, n *Node, key string) string {
	raw, err := n.rdb.HGet(ctx, n.lay.jobs, key).Result()
	if err != nil {
		return ""
	}
	r, err := parseRecord(raw)
	if err != nil {
		return ""
	}
	return r.State
}
