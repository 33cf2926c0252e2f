package member

import (
	"context"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/shepherd-go/shepherd/internal/redistest"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

var srv *redistest.Server

func TestMain(m *testing.M) { redistest.Main(m, &srv) }

func testCtx(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	t.Cleanup(cancel)
	return ctx
}

func TestLeaseHasOneHolder(t *testing.T) {
	t.Parallel()
	ctx := testCtx(t)
	key := "{" + redistest.Name(t) + "}:lease"
	a, b := NewLease(srv.Client(), key, "a"), NewLease(srv.Client(), key, "b")

	held, err := a.Hold(ctx, time.Minute)
	require.NoError(t, err)
	assert.True(t, held, "a free lease is taken")
	held, err = b.Hold(ctx, time.Minute)
	require.NoError(t, err)
	assert.False(t, held, "a held lease is refused to another holder")
	held, err = a.Hold(ctx, 100*time.Millisecond)
	require.NoError(t, err)
	assert.True(t, held, "the holder renews")
	pttl, err := srv.Client().PTTL(ctx, key).Result()
	require.NoError(t, err)
	assert.LessOrEqual(t, pttl, 100*time.Millisecond, "a renewal sets the new TTL")

	// Not renewed, the lease lapses on Redis's clock and another takes it.
	require.Eventually(t, func() bool {
		held, err := b.Hold(ctx, time.Minute)
		return err == nil && held
	}, 5*time.Second, 10*time.Millisecond)
	held, err = a.Hold(ctx, time.Minute)
	require.NoError(t, err)
	assert.False(t, held, "the old holder lost it")

	// Released, it is free at once.
	require.NoError(t, a.Release(ctx), "releasing a lease one does not hold is a no-op")
	held, err = a.Hold(ctx, time.Minute)
	require.NoError(t, err)
	assert.False(t, held, "a's release left b's lease alone")
	require.NoError(t, b.Release(ctx))
	held, err = a.Hold(ctx, time.Minute)
	require.NoError(t, err)
	assert.True(t, held, "a released lease is free at once")
}

func TestLeaseRefusesABadTTL(t *testing.T) {
	t.Parallel()
	_, err := NewLease(srv.Client(), "{"+redistest.Name(t)+"}:lease", "a").Hold(testCtx(t), 0)
	require.Error(t, err)
	assert.Empty(t, redistest.Keys(t, srv.Client(), "{"+redistest.Name(t)+"}*"), "nothing written")
}

// The Lua helpers, as an owner's script uses them.
var helpersScript = redis.NewScript(Lua + `
local now = now_ms()
local first = seen(KEYS[1], "p1", now)
local again = seen(KEYS[1], "p1", now)
local fresh = lapsed(redis.call("HGET", KEYS[1], "p1"), now, 1000)
local old = lapsed(now - 2000, now, 1000)
local none = lapsed(redis.call("HGET", KEYS[1], "nobody"), now, 1000)
lease_hold(KEYS[2], "me", 60000)
local mine = lease_held(KEYS[2], "me")
local theirs = lease_held(KEYS[2], "them")
lease_drop(KEYS[2], "them")
local kept = redis.call("EXISTS", KEYS[2])
lease_drop(KEYS[2], "me")
local dropped = redis.call("EXISTS", KEYS[2])
local function b(v) return v and 1 or 0 end
return {b(first), b(again), b(fresh), b(old), b(none), b(mine), b(theirs), kept, dropped}
`)

func TestLuaHelpers(t *testing.T) {
	t.Parallel()
	tag := "{" + redistest.Name(t) + "}"
	res, err := helpersScript.Run(testCtx(t), srv.Client(), []string{tag + ":alive", tag + ":lease"}).Result()
	require.NoError(t, err)
	assert.Equal(t, []any{
		int64(1), int64(0), // seen: first time, then again
		int64(0), int64(1), int64(1), // lapsed: fresh, 2s old, none
		int64(1), int64(0), // lease_held: mine, theirs
		int64(1), int64(0), // lease_drop: by another keeps it, by me drops it
	}, res)
}

var standingScript = redis.NewScript(Lua + `
local now = now_ms()
local out = {}
out[#out + 1] = renew(KEYS[1], "m", now) and 1 or 0
out[#out + 1] = standing(KEYS[1], "m", KEYS[2], now)
out[#out + 1] = renew(KEYS[1], "m", now) and 1 or 0
out[#out + 1] = standing(KEYS[1], "m", KEYS[2], now)
redis.call("HDEL", KEYS[1], "m") -- declared dead
redis.call("SET", KEYS[2], "settings")
out[#out + 1] = standing(KEYS[1], "m", KEYS[2], now)
return out
`)

func TestKeepAliveStandings(t *testing.T) {
	t.Parallel()
	tag := "{" + redistest.Name(t) + "}"
	res, err := standingScript.Run(testCtx(t), srv.Client(), []string{tag + ":alive", tag + ":unit"}).Result()
	require.NoError(t, err)
	assert.Equal(t, []any{
		int64(0), // renew does not bring back a member without a keep-alive
		"lost",   // no keep-alive and no unit: Redis lost the unit
		int64(1), // renewed
		"ok",
		"revived", // declared dead while the unit lives
	}, res)
	for _, s := range []string{"ok", "revived", "lost"} {
		st, err := ParseStanding(s)
		require.NoError(t, err)
		assert.Equal(t, s, st.String())
	}
	_, err = ParseStanding("GONE")
	assert.Error(t, err)
}

func TestKeepAliveBeatsAndStops(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithCancel(context.Background())
	kick := make(chan struct{}, 1)
	kick <- struct{}{}
	beats := make(chan struct{}, 10)
	done := make(chan struct{})
	go func() {
		defer close(done)
		KeepAlive(ctx, time.Hour, kick, func(context.Context) bool { beats <- struct{}{}; return true })
	}()
	select {
	case <-beats:
	case <-time.After(5 * time.Second):
		t.Fatal("a kick did not beat at once")
	}
	cancel()
	select {
	case <-done:
	case <-time.After(5 * time.Second):
		t.Fatal("KeepAlive did not return when its ctx ended")
	}
}

// A failed beat is tried again after KeepAliveRetry, not a whole interval
// later; a good one waits the interval.
func TestKeepAliveRetriesAFailedBeatSoon(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	beats := make(chan time.Time, 10)
	fails := 2 // owned by the KeepAlive goroutine
	began := time.Now()
	go KeepAlive(ctx, 2*time.Second, nil, func(context.Context) bool {
		beats <- time.Now()
		fails--
		return fails < 0
	})
	var at []time.Duration
	for len(at) < 4 {
		select {
		case b := <-beats:
			at = append(at, b.Sub(began))
		case <-time.After(10 * time.Second):
			t.Fatalf("beats at %v only", at)
		}
	}
	assert.GreaterOrEqual(t, at[0], 2*time.Second, "the first beat waits the interval: %v", at)
	assert.Less(t, at[1]-at[0], time.Second, "a failed beat is tried again soon: %v", at)
	assert.Less(t, at[2]-at[1], time.Second, "and again: %v", at)
	assert.GreaterOrEqual(t, at[3]-at[2], 2*time.Second-50*time.Millisecond, "a good beat waits the interval: %v", at)
}
