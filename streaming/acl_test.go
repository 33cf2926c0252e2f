package streaming

import (
	"context"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/shepherd-go/shepherd/internal/redistest"
	"github.com/shepherd-go/shepherd/internal/testlog"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// A Redis user without CLIENT UNBLOCK (an ACL that grants the stream
// commands only) still gets a working sink and reader: their reads fall
// back to short blocks, Close still returns at once, and the client warns
// once, not once per reader.
func TestWithoutClientUnblock(t *testing.T) {
	t.Parallel()
	s := redistest.Start(t)
	ctx := testCtx(t)
	require.NoError(t, s.Client().Do(ctx, "ACL", "SETUSER", "limited", "on", ">pw", "~*", "&*", "+@all", "-client|unblock").Err())
	rdb := redis.NewClient(&redis.Options{Addr: s.Addr(), Username: "limited", Password: "pw"})
	t.Cleanup(func() { _ = rdb.Close() })
	var logs testlog.Buffer
	logger := slog.New(slog.NewTextHandler(&logs, nil))

	st, err := NewStream(rdb, redistest.Name(t), "jobs")
	require.NoError(t, err)
	sink, err := NewSink(ctx, st, "g", WithBlockDuration(10*time.Second), WithLogger(logger))
	require.NoError(t, err)
	reader, err := NewReader(ctx, st, WithBlockDuration(10*time.Second), WithLogger(logger))
	require.NoError(t, err)
	id, err := st.Add(ctx, "job", []byte("x"))
	require.NoError(t, err)
	assert.Equal(t, id, recv(t, sink.Subscribe(), 5*time.Second).ID)
	assert.Equal(t, id, recv(t, reader.Subscribe(), 5*time.Second).ID)

	for _, c := range []interface{ Close(context.Context) error }{sink, reader} {
		began := time.Now()
		require.NoError(t, c.Close(ctx))
		assert.Less(t, time.Since(began), 2*time.Second, "Close waited for a 10s block")
	}
	assert.Equal(t, 1, strings.Count(logs.String(), "may not run CLIENT ID or CLIENT UNBLOCK"), logs.String())
	assert.Contains(t, logs.String(), "NOPERM")
}
