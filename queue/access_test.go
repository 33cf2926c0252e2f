package queue

import (
	"context"
	"errors"
	"os"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/redis/go-redis/v9/maintnotifications"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/shepherd-go/shepherd/internal/redistest"
)

// A user confined to one queue's keys and channels, with exactly
// ACLCommands, runs every call of the queue; Redis denies nothing.
func TestQueueAsACLUser(t *testing.T) {
	t.Parallel()
	s := redistest.Start(t)
	name := redistest.Name(t)
	args := []any{"ACL", "SETUSER", "queue", "on", ">pw", "resetkeys", "resetchannels",
		"~shepherd:{" + name + "}:*", "&shepherd:{" + name + "}:*", "-@all"}
	for _, c := range strings.Fields(ACLCommands) {
		args = append(args, c)
	}
	ctx := testCtx(t, 30*time.Second)
	require.NoError(t, s.Client().Do(ctx, args...).Err())
	rdb := redis.NewClient(&redis.Options{Addr: s.Addr(), Username: "queue", Password: "pw", ContextTimeoutEnabled: true,
		MaintNotificationsConfig: &maintnotifications.Config{Mode: maintnotifications.ModeDisabled}})
	t.Cleanup(func() { _ = rdb.Close() })

	q, err := Open(ctx, rdb, name, WithTTL(time.Second), WithMaxDeadLetters(1))
	require.NoError(t, err)
	var laters atomic.Int64
	srv, err := q.Serve(func(ctx context.Context, t *Task) ([]byte, error) {
		switch string(t.Payload) {
		case "fail":
			return nil, errors.New("no")
		case "later":
			if laters.Add(1) == 1 {
				return nil, RetryLater(time.Millisecond, errors.New("not now"))
			}
		case "block":
			<-ctx.Done()
			return nil, ctx.Err()
		}
		return []byte("ok"), nil
	}, WithWorkers(2), fastRetries)
	require.NoError(t, err)
	for _, p := range []string{"ok", "fail", "later", "fail"} {
		f, err := q.Submit(ctx, []byte(p), WithMaxAttempts(2), WithDelay(time.Millisecond))
		require.NoError(t, err)
		select {
		case <-f.Done():
		case <-time.After(2 * time.Second):
			res, _ := s.Client().Do(ctx, "ACL", "LOG").Result()
			info, ierr := q.Inspect(ctx, f.ID())
			st, serr := q.Stats(ctx)
			t.Fatalf("no outcome; ACL LOG: %v; task %+v %v; stats %+v %v", res, info, ierr, st, serr)
		}
	}
	dead, err := q.DeadLetters(ctx, 0, 10)
	require.NoError(t, err)
	require.Len(t, dead, 1, "MaxDeadLetters 1 drops the older one")
	require.NoError(t, q.Replay(ctx, dead[0].ID))
	blocked, err := q.Submit(ctx, []byte("block"))
	require.NoError(t, err)
	require.Eventually(t, func() bool {
		info, err := q.Inspect(ctx, blocked.ID())
		return err == nil && info.State == StateActive
	}, 5*time.Second, 5*time.Millisecond)
	// The operators' lists, by state (HKEYS for the active ones).
	for _, state := range []State{StateWaiting, StateDelayed, StateRetrying, StateActive} {
		_, err := q.Tasks(ctx, state, 0, 10)
		require.NoError(t, err, "tasks %s", state)
	}
	require.NoError(t, q.Cancel(ctx, blocked.ID()))
	_, err = wait(t, blocked, 5*time.Second)
	assert.ErrorIs(t, err, ErrCancelled)
	_, err = q.Stats(ctx)
	require.NoError(t, err)
	_, err = q.Result(ctx, blocked.ID())
	assert.ErrorIs(t, err, ErrCancelled)
	require.Eventually(t, func() bool {
		st, err := q.Stats(ctx)
		return err == nil && st.Dead == 1
	}, 5*time.Second, 5*time.Millisecond)
	_, err = q.PurgeDead(ctx)
	require.NoError(t, err)
	// A second process, declared dead after its keep-alives stop, is
	// reaped by the first: the reaping scripts run as the user too.
	other, err := Open(ctx, rdb, name)
	require.NoError(t, err)
	other.tasks.Stop()
	other.tasks.Wait()
	require.Eventually(t, func() bool {
		st, err := q.Stats(ctx)
		return err == nil && len(st.Processes) == 1
	}, 5*time.Second, 10*time.Millisecond)
	_ = other.pubsub.close()
	n, err := q.Drain(ctx)
	require.NoError(t, err)
	assert.Equal(t, 1, n, "processes asked to drain")
	select {
	case <-srv.Done():
	case <-time.After(5 * time.Second):
		t.Fatal("the server did not drain")
	}
	require.NoError(t, srv.Stop(ctx))
	require.NoError(t, q.Close(ctx))

	res, err := s.Client().Do(ctx, "ACL", "LOG").Result()
	require.NoError(t, err)
	assert.Empty(t, res, "Redis denied the queue's user something")
}

// docs/redis.md gives the queue's ACL line with exactly these commands,
// and the commands a queue on Redis Cluster adds.
func TestRedisDocGivesTheQueueACL(t *testing.T) {
	t.Parallel()
	doc, err := os.ReadFile("../docs/redis.md")
	require.NoError(t, err)
	assert.Contains(t, strings.Join(strings.Fields(string(doc)), " "), "-@all "+ACLCommands)
	assert.Contains(t, string(doc), "`"+ClusterACLCommands+"`")
}
