package replica

import (
	"context"
	"errors"
	"net"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/shepherd-go/shepherd/internal/redistest"
	"github.com/shepherd-go/shepherd/internal/redisutil"
)

// pair starts a private primary and a replica of it, synced.
func pair(t *testing.T) (primary, repl *redistest.Server) {
	t.Helper()
	primary = redistest.Start(t)
	host, port, err := net.SplitHostPort(primary.Addr())
	require.NoError(t, err)
	repl = redistest.Start(t, redistest.WithArgs("--replicaof", host, port,
		"--repl-diskless-sync", "yes", "--repl-diskless-sync-delay", "0"))
	synced(t, primary)
	return primary, repl
}

// synced waits until primary has a replica with its whole history.
func synced(t *testing.T, primary *redistest.Server) {
	t.Helper()
	ctx := context.Background()
	require.Eventually(t, func() bool {
		n, err := primary.Client().Do(ctx, "wait", 1, 50).Int64()
		return err == nil && n == 1
	}, 10*time.Second, 20*time.Millisecond, "the replica never synced")
}

func TestValidate(t *testing.T) {
	t.Parallel()
	assert.NoError(t, Ack{}.Validate())
	assert.NoError(t, Ack{N: 1, Timeout: time.Second}.Validate())
	assert.Error(t, Ack{N: -1}.Validate())
	assert.Error(t, Ack{N: 1}.Validate())
	assert.Error(t, Ack{N: 1, Timeout: time.Microsecond}.Validate())
	assert.NoError(t, Ack{N: 1, Timeout: time.Second}.Fits(2*time.Second))
	assert.Error(t, Ack{N: 1, Timeout: time.Second}.Fits(time.Second))
	assert.NoError(t, Ack{}.Fits(time.Millisecond), "no replica asked: nothing to fit")
}

func TestPipeCountsTheReplicasOfItsWrites(t *testing.T) {
	t.Parallel()
	primary, repl := pair(t)
	ctx := context.Background()
	rdb := primary.Client()
	a := Ack{N: 1, Timeout: time.Second}

	var set *redis.StatusCmd
	w, err := Pipe(ctx, rdb, "k", a, func(p redis.Pipeliner) { set = p.Set(ctx, "k", "v", 0) })
	require.NoError(t, err)
	require.NoError(t, set.Err())
	require.NoError(t, Check(w, a))
	assert.Equal(t, "v", repl.Client().Get(ctx, "k").Val(), "a write WAIT confirmed is on the replica")

	// A frozen replica acknowledges nothing: the write stands on the
	// master, and Check says how many replicas acknowledged it.
	require.NoError(t, repl.Freeze())
	a.Timeout = 100 * time.Millisecond
	w, err = Pipe(ctx, rdb, "k", a, func(p redis.Pipeliner) { p.Set(ctx, "k", "w", 0) })
	require.NoError(t, err)
	err = Check(w, a)
	require.ErrorIs(t, err, ErrNotReplicated)
	var re *Error
	require.ErrorAs(t, err, &re)
	assert.Equal(t, Error{Want: 1, Got: 0, Timeout: a.Timeout}, *re)
	assert.Equal(t, "w", rdb.Get(ctx, "k").Val())
	require.NoError(t, repl.Thaw())

	// Off: no WAIT at all.
	w, err = Pipe(ctx, rdb, "k", Ack{}, func(p redis.Pipeliner) { p.Set(ctx, "k", "x", 0) })
	require.NoError(t, err)
	assert.Nil(t, w)
	assert.NoError(t, Check(w, Ack{}))
}

func TestConfirmCoversWritesOfOtherConnections(t *testing.T) {
	t.Parallel()
	primary, repl := pair(t)
	ctx := context.Background()
	a := Ack{N: 1, Timeout: 100 * time.Millisecond}
	// Another connection writes; a reader confirms what it read.
	writer := primary.NewClient()
	defer writer.Close()
	require.NoError(t, repl.Freeze())
	require.NoError(t, writer.Set(ctx, "outcome", "done", 0).Err())
	var got *redis.StringCmd
	err := Confirm(ctx, primary.Client(), "marker", a, func(p redis.Pipeliner) { got = p.Get(ctx, "outcome") })
	require.ErrorIs(t, err, ErrNotReplicated, "the replica is frozen: nothing it read is confirmed")
	assert.Equal(t, "done", got.Val())
	require.NoError(t, repl.Thaw())
	a.Timeout = 5 * time.Second
	require.NoError(t, Confirm(ctx, primary.Client(), "marker", a, func(p redis.Pipeliner) { got = p.Get(ctx, "outcome") }))
	assert.Equal(t, "done", repl.Client().Get(ctx, "outcome").Val(), "confirmed: the replica has it")
	// A missing key read is no error of Confirm's.
	require.NoError(t, Confirm(ctx, primary.Client(), "marker", a, func(p redis.Pipeliner) { p.Get(ctx, "missing") }))
}

func TestWatcherMeasuresWhatAPromotionLost(t *testing.T) {
	t.Parallel()
	primary, repl := pair(t)
	ctx := context.Background()
	w := NewWatcher(primary.Client(), "k")
	f, err := w.Poll(ctx)
	require.NoError(t, err)
	require.Nil(t, f, "the first read is the baseline")
	require.NoError(t, primary.Client().Set(ctx, "a", "1", 0).Err())
	synced(t, primary)

	// The replica is promoted while the old master goes on writing: what
	// it writes after that is not in the new master's history.
	require.NoError(t, repl.Client().Do(ctx, "replicaof", "no", "one").Err())
	for range 10 {
		require.NoError(t, primary.Client().Set(ctx, "b", "2", 0).Err())
	}
	f, err = w.Poll(ctx)
	require.NoError(t, err)
	require.Nil(t, f, "the same master: no failover")
	old, _ := w.Last()

	w.rdb = repl.Client() // the client follows the switch
	f, err = w.Poll(ctx)
	require.NoError(t, err)
	require.NotNil(t, f)
	now, _ := w.Last()
	assert.Equal(t, old.ID, f.OldID)
	assert.Equal(t, now.ID, f.NewID)
	assert.Equal(t, old.Offset, f.Seen)
	require.True(t, f.Related())
	lost, known := f.Lost()
	require.True(t, known)
	assert.Positive(t, lost, "ten writes after the promotion are lost: %+v", f)
	assert.False(t, f.Restart())
}

func TestWatcherSeesARestart(t *testing.T) {
	t.Parallel()
	srv := redistest.Start(t, redistest.WithAOF())
	ctx := context.Background()
	w := NewWatcher(srv.Client(), "k")
	_, err := w.Poll(ctx)
	require.NoError(t, err)
	require.NoError(t, srv.Restart())
	var f *Failover
	require.Eventually(t, func() bool {
		f, err = w.Poll(ctx)
		return err == nil
	}, 10*time.Second, 20*time.Millisecond)
	require.NotNil(t, f, "a restart changes the replication id")
	assert.True(t, f.Restart())
	_, known := f.Lost()
	assert.False(t, known)
}

func TestParseState(t *testing.T) {
	t.Parallel()
	s, err := parseState("# Replication\r\nrole:master\r\nconnected_slaves:2\r\nmaster_replid:abc\r\n" +
		"master_replid2:def\r\nmaster_repl_offset:120\r\nsecond_repl_offset:101\r\n")
	require.NoError(t, err)
	assert.Equal(t, State{Role: "master", ID: "abc", ID2: "def", Offset: 120, Offset2: 101, Replicas: 2}, s)
	_, err = parseState("# Replication\r\n")
	assert.Error(t, err)
	_, err = parseState("role:master\r\nmaster_replid:abc\r\nmaster_repl_offset:x\r\n")
	assert.Error(t, err)
	assert.True(t, errors.Is(&Error{}, ErrNotReplicated))
}

// Watch reads every WatchEvery; a user that may not run INFO is reported
// once, however many reads fail.
func TestWatchReportsARefusedINFOOnce(t *testing.T) {
	t.Parallel()
	srv := redistest.Start(t)
	ctx := context.Background()
	require.NoError(t, srv.Client().Do(ctx, "ACL", "SETUSER", "noinfo", "on", ">pw", "~*", "+@all", "-info").Err())
	user := redis.NewClient(&redis.Options{Addr: srv.Addr(), Username: "noinfo", Password: "pw"})
	defer user.Close()
	wctx, cancel := context.WithTimeout(ctx, 4*WatchEvery)
	defer cancel()
	var reads, denials int
	Watch(wctx, []*Watcher{NewWatcher(user, "k")},
		func(int, State) { reads++ },
		func(int, Failover) { t.Error("no failover happened") },
		func(err error) {
			denials++
			assert.Equal(t, "NOPERM", redisutil.ErrorCode(err))
		})
	assert.Zero(t, reads)
	assert.Equal(t, 1, denials, "reported once")

	// A user that may: every read is passed on.
	wctx, cancel = context.WithTimeout(ctx, 2*WatchEvery+WatchEvery/2)
	defer cancel()
	Watch(wctx, []*Watcher{NewWatcher(srv.Client(), "k")},
		func(i int, s State) {
			reads++
			assert.Equal(t, "master", s.Role)
		},
		func(int, Failover) { t.Error("no failover happened") },
		func(error) { t.Error("INFO is allowed") })
	assert.GreaterOrEqual(t, reads, 2)
}

// TestWatchEndsSoonAfterItsCtxOnAFrozenRedis: a read sent to a Redis that
// froze mid-call does not hold Watch past its ctx longer than
// pollTimeout. go-redis ends a blocked read at the ctx's deadline, not at
// its cancellation: without a bound per read, Watch outlived its ctx for
// as long as the freeze, and a queue's Close waited for it (CI, stop 46
// and this one: the queue package's 10-minute timeout in
// TestCloseOnAFrozenRedisFailsWithErrRedisTimeout).
func TestWatchEndsSoonAfterItsCtxOnAFrozenRedis(t *testing.T) {
	t.Parallel()
	srv := redistest.Start(t)
	rdb := srv.NewCtxOnlyClient()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	reads := make(chan struct{}, 1)
	done := make(chan struct{})
	go func() {
		defer close(done)
		Watch(ctx, []*Watcher{NewWatcher(rdb, "k")}, func(int, State) {
			select {
			case reads <- struct{}{}:
			default:
			}
		}, func(int, Failover) {}, func(error) {})
	}()
	select {
	case <-reads:
	case <-time.After(10 * time.Second):
		t.Fatal("no read")
	}
	require.NoError(t, srv.Freeze())
	t.Cleanup(func() { _ = srv.Thaw() })
	time.Sleep(2 * WatchEvery) // a read is now under way on the frozen Redis
	cancelled := time.Now()
	cancel()
	select {
	case <-done:
		assert.Less(t, time.Since(cancelled), pollTimeout+time.Second)
	case <-time.After(pollTimeout + 5*time.Second):
		t.Fatalf("Watch still runs %v after its ctx ended", pollTimeout+5*time.Second)
	}
}
