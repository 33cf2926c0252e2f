package rmap

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/shepherd-go/shepherd/internal/redistest"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// reloadCount returns how many snapshots m has installed.
func reloadCount(m *Map) int64 {
	m.mu.RLock()
	defer m.mu.RUnlock()
	return m.reloads
}

// writeUntil writes from w until stop is closed and returns how many
// writes were acknowledged.
func writeUntil(t *testing.T, w *Map, stop <-chan struct{}) func() int {
	var (
		wg sync.WaitGroup
		n  atomic.Int64
	)
	wg.Add(1)
	go func() {
		defer wg.Done()
		for i := 0; ; i++ {
			select {
			case <-stop:
				return
			default:
			}
			ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
			if _, err := w.Set(ctx, fmt.Sprint("k", i%50), fmt.Sprint(i)); err == nil {
				n.Add(1)
			}
			cancel()
		}
	}()
	return func() int { wg.Wait(); return int(n.Load()) }
}

// pubSubIDs returns the client IDs of s's subscribed connections.
func pubSubIDs(ctx context.Context, t *testing.T, s *redistest.Server) []string {
	t.Helper()
	list, err := s.Client().ClientList(ctx).Result()
	require.NoError(t, err)
	var ids []string
	for _, line := range strings.Split(list, "\n") {
		var id, flags string
		for _, f := range strings.Fields(line) {
			if v, ok := strings.CutPrefix(f, "id="); ok {
				id = v
			}
			if v, ok := strings.CutPrefix(f, "flags="); ok {
				flags = v
			}
		}
		if strings.Contains(flags, "P") {
			ids = append(ids, id)
		}
	}
	return ids
}

// killPubSub waits until want connections of s are subscribed, then kills
// them: CLIENT KILL TYPE pubsub for RESP2 clients, and by ID for RESP3
// ones, which Redis counts as normal clients.
func killPubSub(ctx context.Context, t *testing.T, s *redistest.Server, want int) {
	t.Helper()
	require.Eventually(t, func() bool { return len(pubSubIDs(ctx, t, s)) >= want }, 10*time.Second, time.Millisecond,
		"replicas resubscribe")
	n, err := s.Client().ClientKillByFilter(ctx, "TYPE", "pubsub").Result()
	require.NoError(t, err)
	for _, id := range pubSubIDs(ctx, t, s) {
		k, err := s.Client().ClientKillByFilter(ctx, "ID", id).Result()
		require.NoError(t, err)
		n += k
	}
	require.GreaterOrEqual(t, n, int64(want))
}

// TestPubSubKilledMidStream kills the replicas' pub/sub connections while a
// writer keeps writing. The check interval is long, so only the detection
// of the broken connection and of the resubscription repairs the copies.
func TestPubSubKilledMidStream(t *testing.T) {
	for _, proto := range []int{2, 3} {
		t.Run(fmt.Sprint("RESP", proto), func(t *testing.T) {
			t.Parallel()
			ctx := testCtx(t)
			s := redistest.Start(t)
			name := redistest.Name(t)
			long := WithCheckInterval(time.Hour)
			client := func() redis.UniversalClient {
				c := redis.NewClient(&redis.Options{Addr: s.Addr(), Protocol: proto})
				t.Cleanup(func() { _ = c.Close() })
				return c
			}
			w := join(t, client(), name, long)
			rs := []*Map{join(t, client(), name, long), join(t, client(), name, long)}

			stop := make(chan struct{})
			wait := writeUntil(t, w, stop)
			for range 5 {
				before := reloadCount(rs[0])
				killPubSub(ctx, t, s, 3)
				require.Eventually(t, func() bool { return reloadCount(rs[0]) > before }, 10*time.Second, time.Millisecond,
					"a killed pub/sub connection causes a reload")
			}
			close(stop)
			require.Positive(t, wait())
			requireConverged(t, s.Client(), append(rs, w)...)

			// And the replicas follow the stream again afterwards.
			_, err := w.Set(ctx, "after", "x")
			require.NoError(t, err)
			requireConverged(t, s.Client(), append(rs, w)...)
		})
	}
}

// TestReconnectReloadsMissedWrites loses a write for sure: the replica's
// pub/sub connection is killed and cannot come back (maxclients) while the
// write is published. No later message reveals a gap and the revision check
// is off, so only the detection of the reconnect can repair the copy.
func TestReconnectReloadsMissedWrites(t *testing.T) {
	t.Parallel()
	ctx := testCtx(t)
	s := redistest.Start(t)
	name := redistest.Name(t)
	r := join(t, s.NewClient(), name, WithCheckInterval(time.Hour))
	w := join(t, s.NewClient(), name, WithCheckInterval(time.Hour))
	_, err := w.Set(ctx, "k", "before")
	require.NoError(t, err)
	require.NoError(t, r.Sync(ctx))

	admin := s.Client()
	n, err := admin.ClientList(ctx).Result()
	require.NoError(t, err)
	clients := strings.Count(strings.TrimSpace(n), "\n") + 1
	require.NoError(t, admin.ConfigSet(ctx, "maxclients", fmt.Sprint(clients-2)).Err())
	killPubSub(ctx, t, s, 2)
	_, err = w.Set(ctx, "k", "missed")
	require.NoError(t, err)
	require.NoError(t, admin.ConfigSet(ctx, "maxclients", "10000").Err())
	require.Eventually(t, func() bool { v, _ := r.Get("k"); return v == "missed" }, 10*time.Second, time.Millisecond,
		"the replica reloads after its pub/sub connection came back")
}

// TestSilentGapCaughtByRevisionCheck changes the map in Redis without
// publishing, as a lost message would leave it; the periodic check finds
// the replicas behind and reloads them.
func TestSilentGapCaughtByRevisionCheck(t *testing.T) {
	t.Parallel()
	ctx := testCtx(t)
	name := redistest.Name(t)
	a := join(t, srv.NewClient(), name, WithCheckInterval(50*time.Millisecond))
	_, err := a.Set(ctx, "k", "1")
	require.NoError(t, err)

	rdb := srv.Client()
	_, err = rdb.TxPipelined(ctx, func(p redis.Pipeliner) error {
		p.HSet(ctx, a.keys[0], "k", "lost")
		p.HIncrBy(ctx, a.keys[1], "rev", 1)
		return nil
	})
	require.NoError(t, err)
	require.Eventually(t, func() bool { v, _ := a.Get("k"); return v == "lost" }, 5*time.Second, time.Millisecond)
	assert.EqualValues(t, 2, a.Rev())
}

// TestWriteAcrossEpochs makes a write's reply come from another
// incarnation than the local copy (changes the copy never heard of, with
// checks off): the write must still return, with the copy reloaded.
func TestWriteAcrossEpochs(t *testing.T) {
	t.Parallel()
	ctx := testCtx(t)
	m := join(t, srv.NewClient(), redistest.Name(t), WithCheckInterval(time.Hour))
	rdb := srv.Client()

	// The map is created behind the copy's back (published elsewhere).
	silent := []string{m.keys[0], m.keys[1], m.keys[2] + "-elsewhere"}
	require.NoError(t, setScript.Run(ctx, rdb, silent, "other-epoch", 100, "k", "v").Err())
	short, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	r, err := m.Delete(short, "missing") // replies from the new epoch; the copy has none
	require.NoError(t, err)
	assert.False(t, r.Applied)
	v, _ := m.Get("k")
	assert.Equal(t, "v", v)

	// The map is deleted behind the copy's back.
	require.NoError(t, rdb.Del(ctx, m.keys[0], m.keys[1]).Err())
	_, err = m.TestAndDelete(short, "k", "other") // replies "no epoch"
	require.NoError(t, err)
	assert.Zero(t, m.Len())
	require.NoError(t, m.Sync(short))
}

// TestConcurrentRandomOps runs random operations from three replicas at
// once, then compares every copy with HGETALL.
func TestConcurrentRandomOps(t *testing.T) {
	t.Parallel()
	ctx := testCtx(t)
	name := redistest.Name(t)
	seed := rand.Uint64()
	t.Logf("seed %d", seed)
	const replicas, ops = 3, 300
	ms := make([]*Map, replicas)
	for i := range ms {
		ms[i] = join(t, srv.NewClient(), name, WithMaxValueSize(256))
	}
	var wg sync.WaitGroup
	for i, m := range ms {
		wg.Add(1)
		go func() {
			defer wg.Done()
			rng := rand.New(rand.NewPCG(seed, uint64(i)))
			for range ops {
				if err := randomOp(ctx, m, rng); err != nil {
					t.Error(err)
					return
				}
			}
		}()
	}
	wg.Wait()
	requireConverged(t, srv.Client(), ms...)
}

// randomOp runs one random write on m. Errors that the operation may
// legitimately return (a list key holding a plain value, say) are fine.
func randomOp(ctx context.Context, m *Map, rng *rand.Rand) error {
	key := fmt.Sprint("k", rng.IntN(8))
	val := fmt.Sprint("v", rng.IntN(4))
	var err error
	switch rng.IntN(12) {
	case 0, 1:
		_, err = m.Set(ctx, key, val)
	case 2:
		if rng.IntN(2) == 0 {
			_, err = m.SetIfNotExists(ctx, key, val)
		} else {
			_, err = m.SetIfExists(ctx, key, val)
		}
	case 3:
		cur, _ := m.Get(key)
		_, err = m.TestAndSet(ctx, key, cur, val)
	case 4:
		_, err = m.Delete(ctx, key)
	case 5:
		cur, _ := m.Get(key)
		_, err = m.TestAndDelete(ctx, key, cur)
	case 6:
		_, err = m.Inc(ctx, fmt.Sprint("n", rng.IntN(3)), rng.Int64N(10)-5)
	case 7:
		_, err = m.AppendValues(ctx, fmt.Sprint("l", rng.IntN(3)), val)
	case 8:
		_, err = m.AppendUniqueValues(ctx, fmt.Sprint("l", rng.IntN(3)), val, fmt.Sprint("v", rng.IntN(4)))
	case 9:
		_, err = m.RemoveValues(ctx, fmt.Sprint("l", rng.IntN(3)), val)
	case 10:
		err = m.Sync(ctx)
	case 11:
		if rng.IntN(20) == 0 {
			_, err = m.Reset(ctx)
		} else {
			_, err = m.Set(ctx, fmt.Sprint("l", rng.IntN(3)), EncodeValues(val))
		}
	}
	if err != nil && !isExpected(err) {
		return err
	}
	return nil
}

func isExpected(err error) bool {
	return errors.Is(err, ErrNotList) || errors.Is(err, ErrTooLarge)
}
