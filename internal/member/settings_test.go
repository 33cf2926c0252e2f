package member

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/shepherd-go/shepherd/internal/redistest"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// settleScript settles as an owner's join script does: live and
// adopt_only come from ARGV[1] and ARGV[2] here, where an owner computes
// them from its keep-alives and records.
var settleScript = redis.NewScript(Lua + `
return settle_settings(KEYS[1], ARGV[1] == "1", ARGV[2] == "1", 3)
`)

func TestSettleOneRuleForEveryOwner(t *testing.T) {
	t.Parallel()
	ctx := testCtx(t)
	key := "{" + redistest.Name(t) + "}:settings"
	rdb := srv.Client()
	settle := func(live, adoptOnly bool, ss ...Setting) (map[string]string, *Mismatch) {
		t.Helper()
		flag := func(b bool) string {
			if b {
				return "1"
			}
			return "0"
		}
		res, err := settleScript.Run(ctx, rdb, []string{key}, SettleArgs([]any{flag(live), flag(adoptOnly)}, ss...)...).Result()
		require.NoError(t, err)
		use, mm, err := Settled(res.([]any))
		require.NoError(t, err)
		return use, mm
	}
	stored := func() map[string]string {
		t.Helper()
		m, err := rdb.HGetAll(ctx, key).Result()
		require.NoError(t, err)
		return m
	}
	ttl := func(v string, explicit bool) Setting { return Setting{Name: "ttl", Value: v, Explicit: explicit} }
	bound := func(v string, explicit bool) Setting { return Setting{Name: "max", Value: v, Explicit: explicit} }

	use, mm := settle(false, true, ttl("5", true))
	assert.Nil(t, mm)
	assert.Equal(t, map[string]string{"ttl": "5"}, use, "an adopt-only member uses its own value when none is stored")
	assert.Empty(t, stored(), "and stores nothing")

	use, _ = settle(false, false, ttl("10", false), bound("100", true))
	assert.Equal(t, map[string]string{"ttl": "10", "max": "100"}, use)
	assert.Equal(t, map[string]string{"ttl": "10", "max": "100"}, stored(), "the first member stores its values")

	use, _ = settle(false, false, ttl("20", false), bound("7", false))
	assert.Equal(t, map[string]string{"ttl": "10", "max": "100"}, use, "values not set are adopted, with no member live")
	use, _ = settle(true, false, ttl("20", false), bound("7", false))
	assert.Equal(t, map[string]string{"ttl": "10", "max": "100"}, use, "and with one live")

	_, mm = settle(true, false, ttl("10", true), bound("7", true))
	assert.Equal(t, &Mismatch{Name: "max", Stored: "100", Mine: "7"}, mm, "an explicit other value is refused while a member is live")
	assert.Equal(t, map[string]string{"ttl": "10", "max": "100"}, stored(), "nothing written")

	use, mm = settle(true, true, ttl("3", true))
	assert.Nil(t, mm, "an adopt-only member is never refused")
	assert.Equal(t, map[string]string{"ttl": "10"}, use)

	use, _ = settle(false, false, ttl("10", false), bound("7", true))
	assert.Equal(t, map[string]string{"ttl": "10", "max": "7"}, use, "with none live, an explicit value replaces the stored one")
	assert.Equal(t, map[string]string{"ttl": "10", "max": "7"}, stored(), "and the others stay")
}

func TestSettledRejectsMalformedReplies(t *testing.T) {
	t.Parallel()
	for _, reply := range [][]any{nil, {"MISMATCH", "a"}, {"OK", "a"}, {"WHAT"}} {
		_, _, err := Settled(reply)
		assert.Error(t, err, "%v", reply)
	}
}

// withdrawScript and withdrawnScript are an owner's withdrawal and the
// check its call's script makes.
var (
	withdrawScript = redis.NewScript(Lua + `
withdraw_call(KEYS[1], ARGV[1], tonumber(ARGV[2]), ARGV[3])
return 0
`)
	withdrawnScript = redis.NewScript(Lua + `
return was_withdrawn(KEYS[1], ARGV[1]) and 1 or 0
`)
)

func TestWithdrawnLedgerForgetsOldNonces(t *testing.T) {
	t.Parallel()
	ctx := testCtx(t)
	key := "{" + redistest.Name(t) + "}:withdrawn"
	rdb := srv.Client()
	has := func(nonce string) bool {
		res, err := withdrawnScript.Run(ctx, rdb, []string{key}, nonce).Int()
		require.NoError(t, err)
		return res == 1
	}
	ttl := int64(60_000)
	require.NoError(t, withdrawScript.Run(ctx, rdb, []string{key}, "old", 1_000_000, ttl).Err())
	assert.True(t, has("old"))
	assert.False(t, has("other"))
	require.NoError(t, withdrawScript.Run(ctx, rdb, []string{key}, "new", 1_000_000+ttl+1, ttl).Err())
	assert.False(t, has("old"), "a nonce older than the TTL is forgotten at the next withdrawal")
	assert.True(t, has("new"))
	pttl, err := rdb.PTTL(ctx, key).Result()
	require.NoError(t, err)
	assert.Greater(t, pttl, time.Duration(0), "the ledger expires a TTL after its last withdrawal")
	assert.LessOrEqual(t, pttl, time.Minute)
}

func TestWithdrawRetriesUntilItSucceeds(t *testing.T) {
	t.Parallel()
	var tries []int
	n, err := Withdraw(testCtx(t), time.Second, func(ctx context.Context) error {
		if _, ok := ctx.Deadline(); !ok {
			return errors.New("no call timeout")
		}
		if len(tries) < 2 {
			return errors.New("redis did not answer")
		}
		return nil
	}, func(try int, err error) { tries = append(tries, try) })
	require.NoError(t, err)
	assert.Equal(t, 3, n)
	assert.Equal(t, []int{1, 2}, tries, "each failed try is reported")
}

func TestWithdrawGivesUpWhenCtxEnds(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithCancel(context.Background())
	n, err := Withdraw(ctx, time.Second, func(context.Context) error {
		return errors.New("redis did not answer")
	}, func(int, error) { cancel() })
	require.EqualError(t, err, "redis did not answer")
	assert.Equal(t, 1, n)
}
