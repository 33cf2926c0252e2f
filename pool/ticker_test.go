package pool

import (
	"sort"
	"sync"
	"testing"
	"time"

	"github.com/shepherd-go/shepherd/internal/redistest"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// tickLog collects the ticks every node's Ticker delivers.
type tickLog struct {
	mu    sync.Mutex
	ticks []tick
	wg    sync.WaitGroup
}

type tick struct {
	at   time.Time
	node string
}

func (l *tickLog) follow(n *Node, tk *Ticker) {
	l.wg.Add(1)
	go func() {
		defer l.wg.Done()
		for at := range tk.C {
			l.mu.Lock()
			l.ticks = append(l.ticks, tick{at: at, node: n.ID()})
			l.mu.Unlock()
		}
	}()
}

func (l *tickLog) snapshot() []tick {
	l.mu.Lock()
	defer l.mu.Unlock()
	out := append([]tick(nil), l.ticks...)
	sort.Slice(out, func(i, j int) bool { return out[i].at.Before(out[j].at) })
	return out
}

func (l *tickLog) count() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return len(l.ticks)
}

// checkOnce asserts that no tick was delivered twice and that
// consecutive ticks are whole periods apart; it returns the largest gap
// in periods.
func checkOnce(t *testing.T, ticks []tick, period time.Duration) int {
	t.Helper()
	most := 0
	for i := 1; i < len(ticks); i++ {
		gap := ticks[i].at.Sub(ticks[i-1].at)
		require.NotZero(t, gap, "tick %v delivered twice (to %s and %s)", ticks[i].at, ticks[i-1].node, ticks[i].node)
		require.Zero(t, gap%period, "ticks %v and %v are not whole periods apart", ticks[i-1].at, ticks[i].at)
		most = max(most, int(gap/period))
	}
	return most
}

func TestTickerTicksOncePerPeriodAcrossNodes(t *testing.T) {
	t.Parallel()
	pool := redistest.Name(t)
	ctx := testCtx(t, 60*time.Second)
	const period = 40 * time.Millisecond
	var log tickLog
	var nodes []*Node
	for range 3 {
		n := addNode(t, srv.NewClient(), pool, WithClientOnly())
		tk, err := n.NewTicker(ctx, "beat", period)
		require.NoError(t, err)
		log.follow(n, tk)
		nodes = append(nodes, n)
	}
	require.Eventually(t, func() bool { return log.count() >= 15 }, 20*time.Second, time.Millisecond)
	ticks := log.snapshot()
	// On a quiet machine the holder misses none (gap 1); a stall of its
	// process longer than a period skips ticks, which Skipped counts.
	t.Logf("largest gap while the holder lived: %d periods", checkOnce(t, ticks, period))
	holder := ticks[0].node
	for _, tk := range ticks {
		assert.Equal(t, holder, tk.node, "ticks went to two nodes")
	}

	// The holder dies: another node takes over within the TTL, and no
	// tick is delivered twice.
	var dead *Node
	for _, n := range nodes {
		if n.ID() == holder {
			dead = n
		}
	}
	before := log.count()
	crashed := time.Now()
	dead.crash()
	require.Eventually(t, func() bool { return log.count() >= before+10 }, 20*time.Second, time.Millisecond)
	ticks = log.snapshot()
	gap := checkOnce(t, ticks, period)
	t.Logf("largest gap after the holder died: %d periods (%v); ticks resumed after %v", gap, time.Duration(gap)*period, time.Since(crashed))
	assert.LessOrEqual(t, time.Duration(gap)*period, 2*time.Second, "the ticker moved later than WorkerTTL + 1s")
	last := ticks[len(ticks)-1].node
	assert.NotEqual(t, holder, last)

	alive := nodes[0]
	if alive == dead {
		alive = nodes[1]
	}
	delivered := log.count()
	st, err := alive.Stats(ctx)
	require.NoError(t, err)
	require.Len(t, st.Tickers, 1)
	info := st.Tickers[0]
	assert.Equal(t, "beat", info.Name)
	assert.Equal(t, period, info.Period)
	assert.Equal(t, last, info.Holder)
	assert.GreaterOrEqual(t, info.Ticks, int64(delivered))
	// No tick goes missing silently: every gap in what was delivered is
	// counted as skipped (the handover's among them).
	missing := int64(0)
	for i := 1; i < len(ticks); i++ {
		missing += int64(ticks[i].at.Sub(ticks[i-1].at)/period) - 1
	}
	assert.GreaterOrEqual(t, info.Skipped, missing, "ticks went missing without being counted as skipped")
	assert.Positive(t, info.Skipped, "the handover skipped the ticks due while no node held the ticker")
	require.Eventually(t, func() bool { return int64(log.count()) >= info.Ticks }, 5*time.Second, time.Millisecond,
		"every tick handed out is delivered")

	// StopTicker stops it for all: every C closes.
	require.NoError(t, StopTicker(ctx, srv.Client(), pool, "beat"))
	done := make(chan struct{})
	go func() { log.wg.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		t.Fatal("a ticker's C was not closed after StopTicker")
	}
	assert.ErrorIs(t, StopTicker(ctx, srv.Client(), pool, "beat"), ErrNoSchedule)
}

// A paused holder (its calls frozen past the TTL) loses the ticker; when
// it wakes, it delivers nothing twice.
func TestTickerMovesFromAPausedHolder(t *testing.T) {
	t.Parallel()
	pool := redistest.Name(t)
	ctx := testCtx(t, 60*time.Second)
	const period = 30 * time.Millisecond
	var log tickLog
	a := addNode(t, srv.NewClient(), pool, WithClientOnly())
	ta, err := a.NewTicker(ctx, "t", period)
	require.NoError(t, err)
	log.follow(a, ta)
	require.Eventually(t, func() bool { return log.count() >= 3 }, 10*time.Second, time.Millisecond)
	b := addNode(t, srv.NewClient(), pool, WithClientOnly())
	tb, err := b.NewTicker(ctx, "t", period)
	require.NoError(t, err)
	log.follow(b, tb)

	a.test.leasesPaused.Store(true)
	require.Eventually(t, func() bool {
		ticks := log.snapshot()
		return len(ticks) > 0 && ticks[len(ticks)-1].node == b.ID()
	}, 10*time.Second, time.Millisecond)
	a.test.leasesPaused.Store(false)
	n := log.count()
	require.Eventually(t, func() bool { return log.count() >= n+10 }, 10*time.Second, time.Millisecond)
	ticks := log.snapshot()
	checkOnce(t, ticks, period)
	for _, tk := range ticks[len(ticks)-10:] {
		assert.Equal(t, b.ID(), tk.node, "the woken holder ticked again")
	}

	// Stop on b: a takes over, C of b closes.
	tb.Stop()
	n = log.count()
	require.Eventually(t, func() bool {
		ticks := log.snapshot()
		return len(ticks) >= n+3 && ticks[len(ticks)-1].node == a.ID()
	}, 10*time.Second, time.Millisecond)
	checkOnce(t, log.snapshot(), period)
}
