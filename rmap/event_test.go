package rmap

import (
	"fmt"
	"testing"

	"github.com/shepherd-go/shepherd/internal/redistest"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestSubscribe(t *testing.T) {
	t.Parallel()
	ctx := testCtx(t)
	name := redistest.Name(t)
	a := join(t, srv.NewClient(), name)
	b := join(t, srv.NewClient(), name)
	events, cancel := b.Subscribe()
	defer cancel()

	_, err := a.Set(ctx, "k", "1")
	require.NoError(t, err)
	_, err = a.Set(ctx, "k", "2")
	require.NoError(t, err)
	_, err = a.Delete(ctx, "k")
	require.NoError(t, err)
	want := []Event{
		{Kind: EventSet, Key: "k", Value: "1", Rev: 1},
		{Kind: EventSet, Key: "k", Value: "2", Rev: 2},
		{Kind: EventDelete, Key: "k", Value: "2", Rev: 3},
	}
	for _, w := range want {
		select {
		case e := <-events:
			assert.Equal(t, w, e)
		case <-ctx.Done():
			t.Fatal("event not delivered")
		}
	}
	cancel()
	cancel()
	for range events { // drains, then closed
	}
}

func TestSubscribeOverflowResyncs(t *testing.T) {
	t.Parallel()
	ctx := testCtx(t)
	m := join(t, srv.NewClient(), redistest.Name(t), WithSubscriberBuffer(4))
	events, cancel := m.Subscribe()
	defer cancel()
	for i := range 20 {
		_, err := m.Set(ctx, fmt.Sprint("k", i), "v")
		require.NoError(t, err)
	}
	// The reader was slow: it gets some early events, then a resync, then
	// the latest ones, ending with the last write.
	var got []Event
	for len(got) == 0 || got[len(got)-1].Key != "k19" {
		select {
		case e := <-events:
			got = append(got, e)
		case <-ctx.Done():
			t.Fatalf("no final event; got %v", got)
		}
	}
	var resync bool
	for _, e := range got {
		resync = resync || e.Kind == EventResync
	}
	assert.True(t, resync, "a lagging subscriber is told to resync")
	assert.Less(t, len(got), 20)
}
