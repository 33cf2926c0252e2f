package dashboard

import (
	"fmt"
	"net/url"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/shepherd-go/shepherd/pool"
	"github.com/shepherd-go/shepherd/queue"
)

// outsideJS lists the addresses of the page's links, forms, stylesheets
// and scripts that are not under the prefix.
var outsideJS = fmt.Sprintf(`Array.from(document.querySelectorAll('a[href], form[action], link[href], script[src]'))
	.map(e => e.getAttribute('href') || e.getAttribute('action') || e.getAttribute('src'))
	.filter(u => !u.startsWith(%q))`, prefix+"/")

// TestMountedInTheBrowser clicks through a dashboard mounted under a
// prefix in a user's own mux, with a token: the overview, a pool, a job,
// back, the job search, a confirmed action, the queue, a task, a
// cancelled action and an error page. Every address the browser is sent
// to, and every address on every page, stays under the prefix.
func TestMountedInTheBrowser(t *testing.T) {
	t.Parallel()
	name, _, h := livePool(t, 2, "alpha", "beta")
	q, _, _ := liveQueue(t, "dead-1")
	_, base := mounted(t, WithToken("s3cret"), WithRefreshEvery(static))
	ctx := tab(t, 60*time.Second)
	poolPath := prefix + "/pool/" + url.PathEscape(name)
	queuePath := prefix + "/queue/" + url.PathEscape(q.Name())

	// at checks that the browser shows path and that nothing on the page
	// points outside the prefix.
	at := func(path string) {
		t.Helper()
		var href string
		var out []string
		require.NoError(t, chromedp.Run(ctx, chromedp.Location(&href), chromedp.Evaluate(outsideJS, &out)))
		assert.Equal(t, base+path, href)
		assert.Empty(t, out, "%s points outside the prefix", path)
	}
	// step runs actions that end on a new page, and checks it.
	step := func(path string, actions ...chromedp.Action) {
		t.Helper()
		require.NoError(t, chromedp.Run(ctx, actions...), "on the way to %s", path)
		at(path)
	}

	// The token moves to a cookie; the page's stylesheet and script load
	// from under the prefix.
	step(prefix+"/", chromedp.Navigate(base+prefix+"/?token=s3cret"), chromedp.WaitVisible("#pools", chromedp.ByQuery))
	var display string
	var scripts []string
	require.NoError(t, chromedp.Run(ctx,
		chromedp.Evaluate(`getComputedStyle(document.querySelector('header')).display`, &display),
		chromedp.Evaluate(`performance.getEntriesByType('resource').filter(e => e.initiatorType === 'script').map(e => new URL(e.name).pathname + ' ' + e.responseStatus)`, &scripts),
	))
	assert.Equal(t, "flex", display, "the stylesheet applies")
	assert.Equal(t, []string{prefix + "/static/app.js 200"}, scripts, "the script loads")

	// Overview → pool → a job of a worker → back to the pool by the
	// breadcrumb.
	step(poolPath,
		chromedp.Click(fmt.Sprintf(`#pools tr[data-pool=%q] a`, name), chromedp.ByQuery),
		chromedp.WaitVisible("#workers", chromedp.ByQuery))
	var key string
	require.NoError(t, chromedp.Run(ctx, chromedp.Text("#workers td.keys a", &key, chromedp.ByQuery)))
	step(poolPath+"/job/"+url.PathEscape(key),
		chromedp.Click("#workers td.keys a", chromedp.ByQuery),
		chromedp.WaitVisible("#job", chromedp.ByQuery))
	step(poolPath,
		chromedp.Click("header nav a", chromedp.ByQuery),
		chromedp.WaitVisible("#workers", chromedp.ByQuery))

	// The job search, then a confirmed action: stop the job.
	step(poolPath+"/job/alpha",
		chromedp.SendKeys("#find-key", "alpha", chromedp.ByQuery),
		chromedp.Click("#find", chromedp.ByQuery),
		chromedp.WaitVisible("#job", chromedp.ByQuery))
	step(poolPath+"/stop",
		chromedp.Click("#stop", chromedp.ByQuery),
		chromedp.WaitVisible("#confirm", chromedp.ByQuery))
	_, err := pool.InspectJob(ctx, srv.Client(), name, "alpha")
	require.NoError(t, err, "nothing happens before the confirmation")
	var flash string
	step(poolPath+"?done=stopped",
		chromedp.Click("#confirm", chromedp.ByQuery),
		chromedp.WaitVisible("#flash", chromedp.ByQuery),
		chromedp.Text("#flash", &flash, chromedp.ByQuery))
	assert.Equal(t, "The job was stopped.", flash)
	_, err = pool.InspectJob(ctx, srv.Client(), name, "alpha")
	assert.ErrorIs(t, err, pool.ErrJobNotFound, "the job is gone from Redis")
	assert.True(t, h.wasStopped("alpha"), "its worker's Stop ran")

	// Home → queue → a dead letter's page → an action cancelled.
	step(prefix+"/",
		chromedp.Click("header a.brand", chromedp.ByQuery),
		chromedp.WaitVisible("#queues", chromedp.ByQuery))
	step(queuePath,
		chromedp.Click(fmt.Sprintf(`#queues tr[data-queue=%q] a`, q.Name()), chromedp.ByQuery),
		chromedp.WaitVisible("#dead", chromedp.ByQuery))
	step(queuePath+"/task/dead-1",
		chromedp.Click(`#dead tr[data-task="dead-1"] a`, chromedp.ByQuery),
		chromedp.WaitVisible("#task", chromedp.ByQuery))
	step(queuePath+"/replay",
		chromedp.Click("#replay", chromedp.ByQuery),
		chromedp.WaitVisible("#confirm", chromedp.ByQuery))
	step(queuePath,
		chromedp.Click("a.cancel", chromedp.ByQuery),
		chromedp.WaitVisible("#dead", chromedp.ByQuery))
	info, err := q.Inspect(ctx, "dead-1")
	require.NoError(t, err)
	assert.Equal(t, queue.StateDead, info.State, "a cancelled action does nothing")

	// An error page leads back to the overview.
	step(prefix+"/pool/no-such-pool",
		chromedp.Navigate(base+prefix+"/pool/no-such-pool"),
		chromedp.WaitVisible("#error-message", chromedp.ByQuery))
	step(prefix+"/",
		chromedp.Click("section.error a", chromedp.ByQuery),
		chromedp.WaitVisible("#pools", chromedp.ByQuery))

	// The user's own route, next to the dashboard.
	var body string
	require.NoError(t, chromedp.Run(ctx, chromedp.Navigate(base+"/healthz"), chromedp.Text("body", &body, chromedp.ByQuery)))
	assert.Equal(t, "ok", body)
}
