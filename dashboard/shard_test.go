package dashboard

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/shepherd-go/shepherd/internal/jsonstyle"
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
	assert.Equal(t, 0, rows[0].Processes, "it serves nothing")
	assert.Equal(t, 1, rows[0].Clients, "a submit-only client")
}

// The queue page of a sharded queue shows its shard count (an unsharded
// one shows none), and its JSON twin has it.
func TestQueuePageShowsTheShards(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	name := redistest.Name(t)
	q, err := queue.Open(ctx, srv.Client(), name, queue.WithShards(3))
	require.NoError(t, err)
	defer func() { require.NoError(t, q.Close(context.Background())) }()
	plain, err := queue.Open(ctx, srv.Client(), name+"-plain")
	require.NoError(t, err)
	defer func() { require.NoError(t, plain.Close(context.Background())) }()
	_, base := serve(t)
	code, body := get(t, base+"/queue/"+name)
	require.Equal(t, 200, code, body)
	assert.Contains(t, body, `<span id="shards">3</span>`)
	for i, st := range mustStats(t, ctx, q).PerShard {
		assert.Contains(t, body, fmt.Sprintf(`<tr data-shard="%d">`, i), "the shards' table")
		assert.Contains(t, body, fmt.Sprintf(`<td class="mono">%s</td><td class="num">%d</td>`, st.Tag, st.Slot), "shard %d's slot", i)
	}
	code, body = get(t, base+"/queue/"+name+"-plain")
	require.Equal(t, 200, code, body)
	assert.NotContains(t, body, `id="shards"`)
	assert.NotContains(t, body, `id="shard-table"`)
	v := twin(t, base+"/queue/"+name+"?format=json")
	assert.Equal(t, 3.0, jsonstyle.At(v, "stats.shards"))
	assert.Equal(t, name+"#2", jsonstyle.At(v, "stats.per_shard.2.tag"))
}

// mustStats returns q's Stats.
func mustStats(t *testing.T, ctx context.Context, q *queue.Queue) queue.Stats {
	t.Helper()
	st, err := q.Stats(ctx)
	require.NoError(t, err)
	return st
}
