package dashboard

import (
	"context"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/shepherd-go/shepherd/internal/redistest"
	"github.com/shepherd-go/shepherd/pool"
)

// TestDashboardThroughRedisOutages: an open pool page while its Redis is
// frozen, then killed: what a user sees, and how soon the page is live
// again after Redis is back.
func TestDashboardThroughRedisOutages(t *testing.T) {
	t.Parallel()
	own := redistest.Start(t, redistest.WithAOF())
	ctx := testCtx(t, 60*time.Second)
	name := redistest.Name(t)
	n, err := pool.AddNode(ctx, own.Client(), name, pool.WithWorkerTTL(10*time.Second))
	require.NoError(t, err)
	t.Cleanup(func() { _ = n.Close(context.Background()) })
	_, err = n.AddWorker(ctx, newJobs())
	require.NoError(t, err)
	for _, k := range []string{"a", "b", "c"} {
		require.NoError(t, n.DispatchJob(ctx, k, nil))
	}
	_, base := serveRedis(t, own.Client(), WithRefreshEvery(200*time.Millisecond))
	tabCtx := tab(t, 60*time.Second)
	require.NoError(t, chromedp.Run(tabCtx,
		chromedp.Navigate(base+"/pool/"+name),
		chromedp.WaitVisible("#jobs", chromedp.ByQuery),
		chromedp.Poll(`document.getElementById('live-state').textContent.startsWith('live')`, nil, chromedp.WithPollingTimeout(5*time.Second)),
	))
	state := func() string {
		var s string
		require.NoError(t, chromedp.Run(tabCtx, chromedp.Text("#live-state", &s, chromedp.ByQuery)))
		return s
	}
	// waitLive measures how long the page takes to be live again, with
	// the pool's numbers.
	waitLive := func(what string) time.Duration {
		start := time.Now()
		require.NoError(t, chromedp.Run(tabCtx, chromedp.Poll(
			`document.getElementById('live-state').textContent.startsWith('live') && document.getElementById('jobs') && document.getElementById('jobs').textContent === '3'`,
			nil, chromedp.WithPollingTimeout(20*time.Second))), "after %s, the page is not live again", what)
		return time.Since(start)
	}

	// Frozen: a read gives up after its 5s bound with 502, the page keeps
	// what it showed and says it failed.
	require.NoError(t, own.Freeze())
	start := time.Now()
	code, body := get(t, base+"/pool/"+name+"?format=json")
	took := time.Since(start)
	assert.Equal(t, http.StatusBadGateway, code, body)
	assert.Less(t, took, 7*time.Second, "a frozen Redis holds a page for its read bound, not longer")
	require.NoError(t, chromedp.Run(tabCtx, chromedp.Poll(`document.getElementById('live-state').textContent.startsWith('update failed')`, nil,
		chromedp.WithPollingTimeout(15*time.Second))))
	var jobs string
	require.NoError(t, chromedp.Run(tabCtx, chromedp.Text("#jobs", &jobs, chromedp.ByQuery)))
	assert.Equal(t, "3", jobs, "the page keeps the last numbers it had")
	require.NoError(t, own.Thaw())
	afterThaw := waitLive("a thaw")
	t.Logf("frozen: a read failed after %v; live again %v after the thaw", took.Round(time.Millisecond), afterThaw.Round(time.Millisecond))

	// Killed: refused at once; live again soon after the restart.
	require.NoError(t, own.Kill())
	start = time.Now()
	code, _ = get(t, base+"/pool/"+name+"?format=json")
	assert.Equal(t, http.StatusBadGateway, code)
	assert.Less(t, time.Since(start), 2*time.Second, "a dead Redis is reported at once")
	require.NoError(t, chromedp.Run(tabCtx, chromedp.Poll(`document.getElementById('live-state').textContent.startsWith('update failed')`, nil,
		chromedp.WithPollingTimeout(15*time.Second))))
	assert.True(t, strings.HasPrefix(state(), "update failed"))
	require.NoError(t, own.Restart())
	afterRestart := waitLive("a restart")
	t.Logf("killed: live again %v after the restart", afterRestart.Round(time.Millisecond))
	assert.Less(t, afterRestart, 15*time.Second)
}
