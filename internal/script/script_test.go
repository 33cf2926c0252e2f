package script

import (
	"context"
	"errors"
	"net"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/shepherd-go/shepherd/internal/keys"
	"github.com/shepherd-go/shepherd/internal/redistest"
	"github.com/shepherd-go/shepherd/internal/redisutil"
	"github.com/shepherd-go/shepherd/internal/replica"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

var srv *redistest.Server

func TestMain(m *testing.M) { redistest.Main(m, &srv) }

// echo returns ARGV[1] and sets KEYS[1] to it.
var echo = redis.NewScript(`redis.call("SET", KEYS[1], ARGV[1]); return ARGV[1]`)

// fail raises a Lua error.
var fail = redis.NewScript(`return redis.error_reply("BOOM it failed")`)

// none returns nil (redis.Nil to the client).
var none = redis.NewScript(`return false`)

func TestRun(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	key := redistest.Name(t)

	res, err := Run(ctx, srv.Client(), echo, "echo", []string{key}, "hello")
	require.NoError(t, err)
	assert.Equal(t, "hello", res)

	// After SCRIPT FLUSH (as after a restart) the script is loaded again.
	require.NoError(t, srv.Client().ScriptFlush(ctx).Err())
	res, err = Run(ctx, srv.Client(), echo, "echo", []string{key}, "again")
	require.NoError(t, err)
	assert.Equal(t, "again", res)

	_, err = Run(ctx, srv.Client(), fail, "rmap.set", []string{key})
	require.Error(t, err)
	assert.Contains(t, err.Error(), "rmap.set: BOOM")

	_, err = Run(ctx, srv.Client(), none, "none", []string{key})
	assert.True(t, errors.Is(err, redis.Nil))

	cctx, ccancel := context.WithCancel(ctx)
	ccancel()
	_, err = Run(cctx, srv.Client(), echo, "echo", []string{key}, "x")
	assert.ErrorIs(t, err, context.Canceled)
}

// keysOf returns the number of keys a call declared and the last one.
var keysOf = redis.NewScript(`return {#KEYS, KEYS[#KEYS]}`)

func TestEveryCallDeclaresTheSlotGuard(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	sp, err := keys.New(redistest.Name(t))
	require.NoError(t, err)
	mine := make([]string, 2, 8) // room to append: the caller's array must not change
	mine[0], mine[1] = sp.Key(keys.KindQueue, "a"), sp.Key(keys.KindQueue, "b")
	for _, run := range []func(context.Context, redis.Scripter, *redis.Script, string, []string, ...any) (any, error){Run, Try} {
		res, err := run(ctx, srv.Client(), keysOf, "keys", mine)
		require.NoError(t, err)
		assert.Equal(t, []any{int64(3), sp.Key(keys.KindGuard, "slot")}, res)
		assert.Equal(t, sp.Key(keys.KindQueue, "b"), mine[:3][1])
		assert.Empty(t, mine[:3][2], "the guard was written into the caller's slice")
	}
	res, err := Run(ctx, srv.Client(), keysOf, "keys", []string{"not-ours"})
	require.NoError(t, err)
	assert.Equal(t, []any{int64(1), "not-ours"}, res, "a key not made by internal/keys has no guard")
}

// moving answers TRYAGAIN, as Redis Cluster does while a slot moves,
// until its counter KEYS[1] reaches ARGV[1].
var moving = redis.NewScript(`
local n = redis.call('INCR', KEYS[1])
if n < tonumber(ARGV[1]) then return redis.error_reply('TRYAGAIN Multiple keys request during rehashing of slot') end
return n`)

// Run waits out a moving slot (TRYAGAIN) until ctx ends; Try does not.
// go-redis retries TRYAGAIN itself 3 times, so 10 tries need Run's.
func TestRunWaitsOutAMovingSlot(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	key := redistest.Name(t)
	res, err := Run(ctx, srv.Client(), moving, "move", []string{key}, 10)
	require.NoError(t, err)
	assert.EqualValues(t, 10, res)

	_, err = Try(ctx, srv.Client(), moving, "move", []string{key + "-try"}, 10)
	require.Error(t, err)
	assert.True(t, Moving(err), "%v", err)
	assert.ErrorContains(t, err, "move: TRYAGAIN")

	short, cancel2 := context.WithTimeout(ctx, 150*time.Millisecond)
	defer cancel2()
	began := time.Now()
	_, err = Run(short, srv.Client(), moving, "move", []string{key + "-never"}, 1<<30)
	require.Error(t, err)
	assert.True(t, Moving(err) || errors.Is(err, context.DeadlineExceeded), "%v", err)
	assert.Less(t, time.Since(began), 2*time.Second, "Run went on after its ctx ended")

	for _, e := range []error{redis.Nil, errors.New("TRYAGAIN not a reply"), context.Canceled} {
		assert.False(t, Moving(e), "%v", e)
	}
}

func TestRunAckedWaitsForReplicas(t *testing.T) {
	t.Parallel()
	primary := redistest.Start(t)
	host, port, err := net.SplitHostPort(primary.Addr())
	require.NoError(t, err)
	repl := redistest.Start(t, redistest.WithArgs("--replicaof", host, port,
		"--repl-diskless-sync", "yes", "--repl-diskless-sync-delay", "0"))
	ctx := context.Background()
	rdb := primary.Client()
	require.Eventually(t, func() bool {
		n, err := rdb.Do(ctx, "wait", 1, 50).Int64()
		return err == nil && n == 1
	}, 10*time.Second, 20*time.Millisecond, "the replica never synced")
	// A script not loaded on this server: EVALSHA fails, EVAL runs it.
	s := redis.NewScript(`redis.call('INCR', KEYS[1]) return redis.call('GET', KEYS[1])` + " -- " + t.Name())
	a := replica.Ack{N: 1, Timeout: time.Second}
	res, err := RunAcked(ctx, rdb, s, "op", []string{"n"}, a)
	require.NoError(t, err)
	assert.Equal(t, "1", res)
	assert.Equal(t, "1", repl.Client().Get(ctx, "n").Val())

	require.NoError(t, repl.Freeze())
	defer func() { _ = repl.Thaw() }()
	a.Timeout = 50 * time.Millisecond
	res, err = RunAcked(ctx, rdb, s, "op", []string{"n"}, a)
	require.ErrorIs(t, err, replica.ErrNotReplicated)
	assert.ErrorContains(t, err, "op: 0 of 1 replicas acknowledged the writes within 50ms")
	assert.Equal(t, "2", res, "the script ran on the master: its reply comes with the error")

	// A script error is the script's, whatever the WAIT says.
	bad := redis.NewScript(`return redis.error_reply('NOPE no')`)
	_, err = RunAcked(ctx, rdb, bad, "op", []string{"n"}, a)
	assert.Equal(t, "NOPE", redisutil.ErrorCode(err))
	// Off, it is Run.
	res, err = RunAcked(ctx, rdb, s, "op", []string{"n"}, replica.Ack{})
	require.NoError(t, err)
	assert.Equal(t, "3", res)
}
