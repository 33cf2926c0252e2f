package main

import (
	"context"
	"sort"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/shepherd-go/shepherd/internal/redistest"
	"github.com/shepherd-go/shepherd/queue"
)

// The clean-up patterns of a queue match the keys of every shard of it,
// and none of another queue whose name starts the same or is read as a
// glob.
func TestQueueKeyPatternsCoverEveryShard(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	name := redistest.Name(t) + "[x]*"
	q, err := queue.Open(ctx, srv.Client(), name, queue.WithShards(3))
	require.NoError(t, err)
	for range 3 { // a task in each shard
		_, err := q.Submit(ctx, nil)
		require.NoError(t, err)
	}
	require.NoError(t, q.Close(ctx))
	// Another queue whose name the unescaped pattern would match.
	other, err := queue.Open(ctx, srv.Client(), redistest.Name(t)+"[x]*y", queue.WithShards(2))
	require.NoError(t, err)
	require.NoError(t, other.Close(ctx))

	var matched []string
	for _, p := range queueKeyPatterns(name) {
		keys, err := srv.Client().Keys(ctx, p).Result()
		require.NoError(t, err)
		matched = append(matched, keys...)
	}
	var want []string
	for _, tag := range []string{name, name + "#1", name + "#2"} {
		keys, err := srv.Client().Keys(ctx, "*").Result()
		require.NoError(t, err)
		for _, k := range keys {
			if len(k) > len("shepherd:{"+tag+"}") && k[:len("shepherd:{"+tag+"}")] == "shepherd:{"+tag+"}" {
				want = append(want, k)
			}
		}
	}
	sort.Strings(matched)
	sort.Strings(want)
	require.NotEmpty(t, want)
	assert.Equal(t, want, matched)
	for _, tag := range []string{name + "#1", name + "#2"} {
		assert.Contains(t, matched, "shepherd:{"+tag+"}:queue:settings")
	}
}
