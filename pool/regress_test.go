package pool

import (
	"context"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/shepherd-go/shepherd/internal/redistest"
	"github.com/shepherd-go/shepherd/jumphash"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// Regression tests for bugs the chaos suite (examples/chaos) found.

// Done closed when stopping began, so a process that exits on Done (as
// the doc invites) cut its Stop handlers short when another node shut the
// pool down.
func TestDoneClosesAfterStopHandlersReturned(t *testing.T) {
	t.Parallel()
	pool := redistest.Name(t)
	a := addNode(t, srv.Client(), pool, WithClientOnly())
	b := addNode(t, srv.NewClient(), pool)
	rec := newRecorder()
	addWorkers(t, b, slowStop{rec}, 2)
	for i := 0; i < 20; i++ {
		require.NoError(t, a.DispatchJob(testCtx(t, 10*time.Second), keyN(i), nil))
	}
	require.Len(t, rec.runningKeys(), 20)
	shut := make(chan error, 1)
	go func() { shut <- a.Shutdown(testCtx(t, 20*time.Second)) }()
	select {
	case <-b.Done():
	case <-time.After(20 * time.Second):
		t.Fatal("the node did not close after the pool shut down")
	}
	require.Empty(t, rec.runningKeys(), "Done closed before the node's Stop handlers ran")
	require.NoError(t, <-shut)
}

// slowStop is a recorder whose Stop takes a while.
type slowStop struct{ *recorder }

func (s slowStop) Stop(ctx context.Context, key string) error {
	time.Sleep(10 * time.Millisecond)
	return s.recorder.Stop(ctx, key)
}

// AddNode against an unresponsive Redis cleaned up with a context without
// deadline, and so returned seconds after its own deadline.
func TestAddNodeReturnsByItsDeadlineWhenRedisHangs(t *testing.T) {
	t.Parallel()
	s := redistest.Start(t)
	rdb := redis.NewClient(&redis.Options{Addr: s.Addr(), ContextTimeoutEnabled: true})
	t.Cleanup(func() { _ = rdb.Close() })
	require.NoError(t, rdb.Ping(testCtx(t, 5*time.Second)).Err())
	require.NoError(t, s.Freeze())
	t.Cleanup(func() { _ = s.Thaw() })
	const deadline = 300 * time.Millisecond
	ctx, cancel := context.WithTimeout(context.Background(), deadline)
	defer cancel()
	start := time.Now()
	_, err := AddNode(ctx, rdb, redistest.Name(t), fastOpts()...)
	took := time.Since(start)
	require.Error(t, err)
	require.Less(t, took, deadline+releaseGrace+500*time.Millisecond, "AddNode returned %v after its %v deadline", took, deadline)
}

// A job moved by a rebalance was lost when Redis failed between its Stop
// and its release: the record still named the old worker as running it,
// the worker had dropped it, and nothing requeues a running job of a live
// worker.
func TestMoveSurvivesARedisBlipBetweenStopAndRelease(t *testing.T) {
	t.Parallel()
	s := redistest.Start(t, redistest.WithAOF())
	pool := redistest.Name(t)
	n := addNode(t, s.NewClient(), pool, WithWorkerTTL(5*time.Second))
	// A key that the second slot takes over.
	key := ""
	for i := 0; key == ""; i++ {
		if jumphash.HashString(keyN(i), 2) == 1 {
			key = keyN(i)
		}
	}
	first := &blipOnStop{recorder: newRecorder(), srv: s, t: t, added: make(chan struct{})}
	addWorkers(t, n, first, 1)
	require.NoError(t, n.DispatchJob(testCtx(t, 10*time.Second), key, nil))

	second := newRecorder()
	addWorkers(t, n, second, 1) // the job moves: Stop on first kills Redis
	close(first.added)
	require.Eventually(t, func() bool { return first.blipped.Load() }, 10*time.Second, 10*time.Millisecond)
	require.Eventually(t, func() bool {
		return union(first.recorder, second)[key] == 1
	}, 10*time.Second, 20*time.Millisecond, "the moved job never started again")
}

// blipOnStop kills Redis in its first Stop and brings it back shortly
// after, so that the release that follows the Stop fails.
type blipOnStop struct {
	*recorder
	srv     *redistest.Server
	t       *testing.T
	added   chan struct{} // closed once AddWorker, which Redis needs, returned
	blipped atomic.Bool
	wg      sync.WaitGroup
}

func (b *blipOnStop) Stop(ctx context.Context, key string) error {
	err := b.recorder.Stop(ctx, key)
	if b.blipped.CompareAndSwap(false, true) {
		select {
		case <-b.added:
		case <-time.After(10 * time.Second):
			b.t.Error("AddWorker did not return")
		}
		require.NoError(b.t, b.srv.Kill())
		b.wg.Add(1)
		go func() {
			defer b.wg.Done()
			<-time.After(2 * time.Second) // the outage; shorter ones go-redis retries away
			assert.NoError(b.t, b.srv.Restart())
		}()
		b.t.Cleanup(b.wg.Wait)
	}
	return err
}
