package streaming

import (
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// blockedClients counts connections blocked in cmd (XREAD or XREADGROUP)
// on the server behind rdb.
func blockedClients(t testing.TB, rdb redis.UniversalClient, cmd string) int {
	t.Helper()
	list, err := rdb.ClientList(testCtx(t)).Result()
	require.NoError(t, err)
	n := 0
	for _, line := range strings.Split(list, "\n") {
		if strings.Contains(line, "cmd="+cmd+" ") && strings.Contains(line, "flags=b ") {
			n++
		}
	}
	return n
}

// The close tests get a server of their own: counting blocked clients on
// the shared one would see other tests' reads.
func TestSinkCloseWhileBlockedReturnsAtOnce(t *testing.T) {
	t.Parallel()
	ctx := testCtx(t)
	rdb := ownServer(t).Client()
	s := newStream(t, rdb)
	sink, err := NewSink(ctx, s, "g", WithBlockDuration(10*time.Second))
	require.NoError(t, err)
	require.Eventually(t, func() bool { return blockedClients(t, rdb, "xreadgroup") == 1 },
		5*time.Second, 5*time.Millisecond, "the sink never blocked in XREADGROUP")
	start := time.Now()
	require.NoError(t, sink.Close(ctx))
	assert.Less(t, time.Since(start), 100*time.Millisecond)
	assert.Zero(t, blockedClients(t, rdb, "xreadgroup"))
}

func TestReaderCloseWhileBlockedReturnsAtOnce(t *testing.T) {
	t.Parallel()
	ctx := testCtx(t)
	rdb := ownServer(t).Client()
	s := newStream(t, rdb)
	r, err := NewReader(ctx, s, WithBlockDuration(10*time.Second))
	require.NoError(t, err)
	require.Eventually(t, func() bool { return blockedClients(t, rdb, "xread") == 1 },
		5*time.Second, 5*time.Millisecond, "the reader never blocked in XREAD")
	start := time.Now()
	require.NoError(t, r.Close(ctx))
	assert.Less(t, time.Since(start), 100*time.Millisecond)
}

// notAClient hides the *redis.Client behind the interface, as a Cluster
// or Ring client would be: no dedicated connection is possible.
type notAClient struct{ redis.UniversalClient }

func TestCloseWithoutDedicatedConnectionIsBounded(t *testing.T) {
	t.Parallel()
	ctx := testCtx(t)
	s := newStream(t, notAClient{srv.Client()})
	sink, err := NewSink(ctx, s, "g", WithBlockDuration(10*time.Second))
	require.NoError(t, err)
	r, err := NewReader(ctx, s, WithBlockDuration(10*time.Second))
	require.NoError(t, err)
	ids := addN(t, s, 1)
	assert.Equal(t, ids[0], recv(t, sink.Subscribe(), 5*time.Second).ID)
	assert.Equal(t, ids[0], recv(t, r.Subscribe(), 5*time.Second).ID)
	start := time.Now()
	require.NoError(t, sink.Close(ctx))
	require.NoError(t, r.Close(ctx))
	// Each read blocks for at most fallbackBlock; allow for -race slowness.
	assert.Less(t, time.Since(start), 2*fallbackBlock+300*time.Millisecond)
}
