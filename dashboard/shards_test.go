package dashboard

import (
	"context"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/shepherd-go/shepherd/internal/redistest"
	"github.com/shepherd-go/shepherd/pool"
)

// A pool of several shards is one pool to the dashboard: listed once
// (its shards' tags "NAME#i" are not pools of their own), its page adds
// the shards up and says how many, and its job list and job pages reach
// every shard.
func TestShardedPoolIsOnePool(t *testing.T) {
	t.Parallel()
	ctx := testCtx(t, 30*time.Second)
	name := redistest.Name(t)
	n, err := pool.AddNode(ctx, srv.NewClient(), name, pool.WithShards(3), pool.WithWorkerTTL(2*time.Second))
	require.NoError(t, err)
	t.Cleanup(func() { _ = n.Close(context.Background()) })
	_, err = n.AddWorker(ctx, newJobs())
	require.NoError(t, err)
	keys := []string{"a", "b", "c", "d", "e", "f", "g", "h", "i"}
	for _, k := range keys {
		require.NoError(t, n.DispatchJob(ctx, k, []byte("payload of "+k)))
	}

	pools, _, err := Names(ctx, srv.Client())
	require.NoError(t, err)
	assert.Contains(t, pools, name)
	for _, p := range pools {
		assert.False(t, strings.HasPrefix(p, name+"#"), "a shard listed as a pool: %s", p)
	}

	_, base := serve(t)
	code, body := get(t, base+"/pool/"+name)
	require.Equal(t, http.StatusOK, code, body)
	assert.Contains(t, body, "3 shards")
	code, body = get(t, base+"/pool/"+name+"/jobs")
	require.Equal(t, http.StatusOK, code, body)
	for _, k := range keys {
		assert.Contains(t, body, "/pool/"+name+"/job/"+k, "the job list reaches every shard")
		code, jb := get(t, base+"/pool/"+name+"/job/"+k)
		require.Equal(t, http.StatusOK, code, jb)
		assert.Contains(t, jb, "payload of "+k)
	}
}
