package group

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func TestGoStopWait(t *testing.T) {
	g := New(context.Background())
	var ran atomic.Int32
	for range 3 {
		require.True(t, g.Go(func() {
			<-g.Context().Done()
			ran.Add(1)
		}))
	}
	g.Stop()
	g.Wait()
	assert.EqualValues(t, 3, ran.Load(), "every goroutine saw the stop and returned")
	assert.False(t, g.Go(func() { t.Error("ran after Stop") }))
	g.Stop() // idempotent
}

func TestCloseRefusesButDoesNotCancel(t *testing.T) {
	g := New(context.Background())
	release := make(chan struct{})
	require.True(t, g.Go(func() { <-release }))
	g.Close()
	assert.False(t, g.Go(func() {}))
	assert.NoError(t, g.Context().Err(), "Close does not cancel")
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Millisecond)
	defer cancel()
	assert.ErrorIs(t, g.WaitContext(ctx), context.DeadlineExceeded, "a goroutine still runs")
	close(release)
	require.NoError(t, g.WaitContext(context.Background()))
	g.Stop()
}

func TestParentCancelsTheGroup(t *testing.T) {
	parent, cancel := context.WithCancel(context.Background())
	g := New(parent)
	done := make(chan struct{})
	require.True(t, g.Go(func() { <-g.Context().Done(); close(done) }))
	cancel()
	<-done
	g.Stop()
	g.Wait()
}
