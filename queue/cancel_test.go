package queue

import (
	"testing"
	"time"

	"github.com/shepherd-go/shepherd/internal/redistest"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// A cancel message can reach the process before the reply of the take
// that gave it the task (pub/sub and the take use different
// connections): the cancel must not be lost, or a task cancelled while
// taken ahead runs (TestTaskCancelledWhileTakenAheadDoesNotRun failed so
// once in a full run). Here the two arrive in that order for sure.
func TestCancelBeforeTheTakeReplyIsKept(t *testing.T) {
	t.Parallel()
	q := open(t, redistest.Name(t))
	s := serve(t, q, echo, WithWorkers(1))
	s.cancelTask("early") // the cancel message, first
	_, _, err := s.taken(testCtx(t, 5*time.Second), q.lay, []any{"OK", int64(-1),
		"early", "", int64(1), int64(3), int64(time.Minute.Milliseconds()), int64(0), "", ""})
	require.NoError(t, err)
	s.mu.Lock()
	r := s.running["early"]
	s.mu.Unlock()
	require.NotNil(t, r, "the taken task is not registered")
	assert.True(t, r.cancelled.Load(), "the cancel that came before the take's reply was lost")
	s.mu.Lock()
	assert.Empty(t, s.early, "a cancel applied is forgotten")
	s.mu.Unlock()
}

// Early cancels of tasks that never come are forgotten after a while.
func TestEarlyCancelsAreForgotten(t *testing.T) {
	t.Parallel()
	q := open(t, redistest.Name(t))
	s := serve(t, q, echo, WithWorkers(1))
	s.mu.Lock()
	s.early = map[string]time.Time{"old": time.Now().Add(-2 * earlyCancelTTL)}
	s.mu.Unlock()
	s.cancelTask("new")
	s.mu.Lock()
	defer s.mu.Unlock()
	assert.Equal(t, []string{"new"}, keysOf(s.early))
}

func keysOf(m map[string]time.Time) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	return out
}

// A task of one of this process's own failed Submits must not start
// here, even when a take of this process got it before the withdrawal
// reached Redis (TestFailedSubmitsDuringAFrozenRedisNeverRun failed so
// once); a task of the same id queued by a later Submit (another nonce)
// runs.
func TestOwnWithdrawnSubmitDoesNotStart(t *testing.T) {
	t.Parallel()
	q := open(t, redistest.Name(t))
	ctx := testCtx(t, 10*time.Second)
	_, err := q.Submit(ctx, nil, WithTaskID("w"), WithDelay(time.Hour))
	require.NoError(t, err)
	nonce := storedTask(t, ctx, q.rdb, q.lay, "w")[fieldNonce]
	require.NotEmpty(t, nonce)

	assert.False(t, q.maybeWithdrawn(ctx, 0, "w"), "no failed Submit of w")
	q.noteWithdrawal(nonce, "w", time.Time{})
	assert.True(t, q.maybeWithdrawn(ctx, 0, "w"), "the task of a Submit being withdrawn started")
	q.noteWithdrawal("another-nonce", "w", time.Now().Add(time.Minute))
	q.noteWithdrawal(nonce, "", time.Time{})
	assert.False(t, q.maybeWithdrawn(ctx, 0, "w"), "a task queued by another Submit of the same id is kept from running")
	q.noteWithdrawal("old", "x", time.Now().Add(-time.Second))
	q.noteWithdrawal("fresh", "y", time.Time{})
	q.mu.Lock()
	defer q.mu.Unlock()
	assert.NotContains(t, q.withdrawing, "old", "a settled withdrawal past its time is forgotten")
	assert.Contains(t, q.withdrawing, "fresh")
}
