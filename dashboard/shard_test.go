package dashboard

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/shepherd-go/shepherd/internal/redistest"
	"github.com/shepherd-go/shepherd/queue"
)

// A queue of many shards is listed once, with the tasks of every shard:
// its other shards' settings keys ("NAME#i") are not queues.
func TestShardedQueueIsListedOnce(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	name := redistest.Name(t)
	q, err := queue.Open(ctx, srv.Client(), name, queue.WithShards(3))
	require.NoError(t, err)
	defer func() { require.NoError(t, q.Close(context.Background())) }()
	for range 6 { // round the shards
		_, err := q.Submit(ctx, nil)
		require.NoError(t, err)
	}
	l, err := List(ctx, srv.Client())
	require.NoError(t, err)
	var rows []QueueRow
	for _, r := range l.Queues {
		if len(r.Name) >= len(name) && r.Name[:len(name)] == name {
			rows = append(rows, r)
		}
	}
	require.Len(t, rows, 1, "%+v", rows)
	assert.Equal(t, name, rows[0].Name)
	assert.Empty(t, rows[0].Error)
	assert.EqualValues(t, 6, rows[0].Available, "every shard's tasks")
	assert.Equal(t, 1, rows[0].Processes)
}
