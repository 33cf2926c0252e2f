package queue

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/shepherd-go/shepherd/internal/redistest"
)

// A subscription's confirmation that never comes (Redis froze after the
// subscribe was sent) ends after confirmWait, whatever the ctx: with no
// deadline, it waited for the whole freeze, and so did Queue.Close,
// waiting for the goroutine that renews subscriptions.
func TestASubscribeConfirmationEndsOnAFrozenRedis(t *testing.T) {
	t.Parallel()
	s := redistest.Start(t)
	rdb := s.NewClient()
	t.Cleanup(func() { _ = rdb.Close() })
	ctx := context.Background() // no deadline, as the queue's loops' ctx
	ps := rdb.Subscribe(ctx)
	t.Cleanup(func() { _ = ps.Close() })
	require.NoError(t, confirmed(ctx, ps, 1, ps.Subscribe(ctx, "a")))
	require.NoError(t, s.Freeze())
	t.Cleanup(func() { _ = s.Thaw() })
	done := make(chan error, 1)
	go func() { done <- confirmed(ctx, ps, 1, ps.Subscribe(ctx, "b")) }()
	select {
	case err := <-done:
		require.Error(t, err)
	case <-time.After(confirmWait + 5*time.Second):
		t.Fatalf("the confirmation still waits %v after Redis froze", confirmWait+5*time.Second)
	}
}
