package queue

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/shepherd-go/shepherd/internal/redistest"
)

// settingsOf returns the queue-wide settings a process uses.
func settingsOf(q *Queue) [3]int64 {
	return [3]int64{q.cfg.ttl.Milliseconds(), int64(q.cfg.maxQueued), int64(q.cfg.maxDead)}
}

// The queue-wide settings are stored with the queue by its first
// process. A process that sets one to another value is refused while
// another process is live, and leaves nothing behind; a process that does
// not set one adopts the stored value, whether a process is live or not
// (DESIGN.md invariant 12). Once no process is live, a process may change
// them, and what it did not set stays. Opening with no options after
// every process had closed used to reset them to the defaults.
func TestQueueWideSettingsAreStoredWithTheQueue(t *testing.T) {
	t.Parallel()
	ctx := testCtx(t, 30*time.Second)
	name := redistest.Name(t)
	first := open(t, name, WithTTL(2*time.Second), WithMaxQueued(100), WithMaxDeadLetters(7))

	for _, tc := range []struct {
		opt           Option
		label, theirs string
	}{
		{WithTTL(3 * time.Second), "TTL (ms)", "3000"},
		{WithMaxQueued(5), "MaxQueued", "5"},
		{WithMaxDeadLetters(9), "MaxDeadLetters", "9"},
	} {
		_, err := Open(ctx, srv.Client(), name, tc.opt)
		require.ErrorIs(t, err, ErrInvalidOption, tc.label)
		assert.Contains(t, err.Error(), tc.label+":")
		assert.Contains(t, err.Error(), "this process sets "+tc.theirs)
	}
	procs, err := srv.Client().HKeys(ctx, first.lay.procs).Result()
	require.NoError(t, err)
	assert.Equal(t, []string{first.Process()}, procs, "a refused process left its record")

	adopter := open(t, name)
	assert.Equal(t, [3]int64{2000, 100, 7}, settingsOf(adopter), "a process that sets nothing adopts the queue's settings")

	// Every process leaves: the queue is dormant.
	require.NoError(t, first.Close(ctx))
	require.NoError(t, adopter.Close(ctx))
	dormant := open(t, name)
	assert.Equal(t, [3]int64{2000, 100, 7}, settingsOf(dormant), "a process that sets nothing adopts the stored settings, live processes or not")
	require.NoError(t, dormant.Close(ctx))

	changer := open(t, name, WithMaxQueued(50))
	assert.Equal(t, [3]int64{2000, 50, 7}, settingsOf(changer), "what the changer did not set stays")
	stored, err := srv.Client().HGetAll(ctx, changer.lay.settings).Result()
	require.NoError(t, err)
	assert.Equal(t, map[string]string{settingTTL: "2000", settingMaxQueued: "50", settingMaxDead: "7", settingShards: "1"}, stored)
	require.NoError(t, closeWithin(changer))
}
