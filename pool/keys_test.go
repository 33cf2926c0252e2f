package pool

import (
	"context"
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/shepherd-go/shepherd/internal/redistest"
	"github.com/shepherd-go/shepherd/rmap"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// Once every node of a pool has closed, the pool is dormant, not gone:
// it keeps exactly the keys docs/redis.md lists ("What stays in Redis"):
// its settings, counters and slot table, the maps' revisions, the job
// stream with its routers' group, and the jobs that wait for the next
// worker. Shutdown deletes every one of them. (A guard: the pool left
// nothing else before either; the queue did, see queue/keys_test.go.)
func TestAClosedPoolKeepsOnlyWhatTheRedisDocLists(t *testing.T) {
	t.Parallel()
	ctx := testCtx(t, 30*time.Second)
	name := redistest.Name(t)
	full := addNode(t, srv.Client(), name)
	other := addNode(t, srv.NewClient(), name)
	client := addNode(t, srv.NewClient(), name, WithClientOnly())
	rec := newRecorder()
	addWorkers(t, full, rec, 2)
	addWorkers(t, other, rec, 1)
	for i := range 4 {
		require.NoError(t, client.DispatchJob(ctx, keyN(i), nil))
	}
	// A payload larger than maxInlinePayload is kept in the payloads
	// hash, apart from the job's record.
	require.NoError(t, client.DispatchJob(ctx, keyN(4), make([]byte, maxInlinePayload+1)))
	require.NoError(t, client.NotifyWorker(ctx, keyN(0), []byte("n")))
	for i := range 4 {
		require.NoError(t, client.StopJob(ctx, keyN(i)))
	}
	// keyN(4) still runs: it waits in the pool for the next worker.
	for _, n := range []*Node{full, other, client} {
		require.NoError(t, n.Close(ctx))
	}
	lay := full.lay
	dormant := []string{
		lay.settings, lay.counters, lay.slots, lay.slotsRev, workersRev(t, name), lay.jobStream,
		lay.jobs, lay.payloads,
	}
	var left []string
	require.Eventually(t, func() bool {
		// The janitor's recoveries are kept too, when it recovered
		// something (a keep-alive late on a loaded machine).
		// So is the history, which expires after HistorySpan.
		left = slices.DeleteFunc(redistest.Keys(t, srv.Client(), "*{"+name+"}*"), func(k string) bool { return k == lay.recovery || k == lay.history })
		return assert.ObjectsAreEqual(slices.Sorted(slices.Values(dormant)), left)
	}, 10*time.Second, 20*time.Millisecond, "left %v, want %v", &left, slices.Sorted(slices.Values(dormant)))
	for _, k := range append(dormant, lay.recovery, lay.history) {
		requireDocumentedKey(t, k)
	}
	jobs, err := srv.Client().HKeys(ctx, lay.jobs).Result()
	require.NoError(t, err)
	assert.Equal(t, []string{keyN(4)}, jobs, "only the job that waits for a worker is kept")

	last := addNode(t, srv.Client(), name, WithClientOnly())
	require.NoError(t, last.Shutdown(ctx))
	assert.Empty(t, redistest.Keys(t, srv.Client(), "*{"+name+"}*"), "Shutdown left keys")
	require.NoError(t, last.Close(context.Background()))
}

// requireDocumentedKey fails the test unless docs/redis.md's table of what
// stays in Redis names key, by its part after the pool's hash tag
// ("`pool:settings`").
func requireDocumentedKey(t *testing.T, key string) {
	t.Helper()
	_, name, ok := strings.Cut(key, "}:")
	require.True(t, ok, "a key without a hash tag: %q", key)
	doc, err := os.ReadFile("../docs/redis.md")
	require.NoError(t, err)
	assert.Contains(t, string(doc), "`"+name+"`", "docs/redis.md does not list the key %q that a dormant pool keeps", name)
}

// workersRev is the revision hash of the pool's workers map.
func workersRev(t *testing.T, pool string) string {
	t.Helper()
	l, err := rmap.KeysOf(pool, workersMap)
	require.NoError(t, err)
	return l.Rev
}
