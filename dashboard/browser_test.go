package dashboard

import (
	"fmt"
	"net/url"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/cdproto/emulation"
	"github.com/chromedp/chromedp"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/shepherd-go/shepherd/internal/redistest"
	"github.com/shepherd-go/shepherd/pool"
	"github.com/shepherd-go/shepherd/queue"
)

// static is a refresh period long enough that a page under test never
// swaps its DOM while the test clicks in it; TestLiveUpdates covers the
// refresh.
const static = time.Hour

func keysN(prefix string, n int) []string {
	out := make([]string, n)
	for i := range out {
		out[i] = fmt.Sprintf("%s-%02d", prefix, i)
	}
	return out
}

// rowsJS reads a table's rows: the row's data attribute and the text of
// its cell marked data-field.
func rowsJS(table, attr, field string) string {
	return fmt.Sprintf(`Object.fromEntries(Array.from(document.querySelectorAll(%q)).map(tr => [tr.dataset[%q], tr.querySelector('[data-field=%q]').textContent.trim()]))`,
		table+" tbody tr", attr, field)
}

func TestOverviewListsPoolsAndQueues(t *testing.T) {
	t.Parallel()
	name, _, _ := livePool(t, 2, keysN("k", 5)...)
	q, _, _ := liveQueue(t, "dead-1")
	_, base := serve(t, WithRefreshEvery(static))
	ctx := tab(t, 30*time.Second)

	var poolJobs, queueHealth map[string]string
	require.NoError(t, chromedp.Run(ctx,
		chromedp.Navigate(base+"/"),
		chromedp.WaitVisible("#pools", chromedp.ByQuery),
		chromedp.Evaluate(rowsJS("#pools", "pool", "jobs"), &poolJobs),
		chromedp.Evaluate(`Object.fromEntries(Array.from(document.querySelectorAll('#queues tbody tr')).map(tr => [tr.dataset.queue, tr.querySelector('.badge').textContent]))`, &queueHealth),
	))
	assert.Equal(t, "5", poolJobs[name], "the pool's row counts its jobs")
	assert.Equal(t, "warn", queueHealth[q.Name()], "a queue with a dead letter is flagged")

	var href string
	require.NoError(t, chromedp.Run(ctx,
		chromedp.Click(fmt.Sprintf(`#pools tr[data-pool=%q] a`, name), chromedp.ByQuery),
		chromedp.WaitVisible("#workers", chromedp.ByQuery),
		chromedp.Location(&href),
	))
	assert.True(t, strings.HasSuffix(href, "/pool/"+url.PathEscape(name)), href)
}

func TestPoolPageShowsWhatRunsWhere(t *testing.T) {
	t.Parallel()
	name, n, _ := livePool(t, 3, keysN("job", 12)...)
	_, base := serve(t, WithRefreshEvery(static))
	ctx := tab(t, 30*time.Second)
	st, err := n.Stats(ctx)
	require.NoError(t, err)

	var perWorker, hosts, pids map[string]string
	require.NoError(t, chromedp.Run(ctx,
		chromedp.Navigate(base+"/pool/"+name),
		chromedp.WaitVisible("#workers", chromedp.ByQuery),
		chromedp.Evaluate(rowsJS("#workers", "worker", "jobs"), &perWorker),
		chromedp.Evaluate(rowsJS("#nodes", "node", "host"), &hosts),
		chromedp.Evaluate(rowsJS("#nodes", "node", "pid"), &pids),
	))
	require.Len(t, perWorker, 3)
	total := 0
	for _, w := range st.Workers {
		assert.Equal(t, strconv.Itoa(w.Jobs), perWorker[w.ID], "worker %s", w.ID)
		total += w.Jobs
	}
	assert.Equal(t, 12, total)
	host, _ := os.Hostname()
	assert.Equal(t, host, hosts[n.ID()], "the node's host")
	assert.Equal(t, strconv.Itoa(os.Getpid()), pids[n.ID()], "the node's PID")
}

func TestJobPageAndStoppingTheJob(t *testing.T) {
	t.Parallel()
	name, _, h := livePool(t, 2, "alpha", "beta")
	_, base := serve(t, WithRefreshEvery(static))
	ctx := tab(t, 30*time.Second)
	info, err := pool.InspectJob(ctx, srv.Client(), name, "alpha")
	require.NoError(t, err)

	var state, worker, attempt, payload, question, href, flash string
	require.NoError(t, chromedp.Run(ctx,
		chromedp.Navigate(base+"/pool/"+name),
		chromedp.WaitVisible("#find-key", chromedp.ByQuery),
		chromedp.SendKeys("#find-key", "alpha", chromedp.ByQuery),
		chromedp.Click("#find", chromedp.ByQuery),
		chromedp.WaitVisible("#job", chromedp.ByQuery),
		chromedp.Text("#state", &state, chromedp.ByQuery),
		chromedp.Text("#worker", &worker, chromedp.ByQuery),
		chromedp.Text("#attempt", &attempt, chromedp.ByQuery),
		chromedp.Text("#payload", &payload, chromedp.ByQuery),
	))
	assert.Equal(t, "running", state)
	assert.Contains(t, worker, info.Worker)
	assert.Equal(t, "1", attempt)
	assert.Equal(t, "payload of alpha", payload)

	require.NoError(t, chromedp.Run(ctx,
		chromedp.Click("#stop", chromedp.ByQuery),
		chromedp.WaitVisible("#confirm", chromedp.ByQuery),
		chromedp.Text("#question", &question, chromedp.ByQuery),
	))
	assert.Contains(t, question, `"alpha"`)
	_, err = pool.InspectJob(ctx, srv.Client(), name, "alpha")
	require.NoError(t, err, "nothing happens before the confirmation")

	require.NoError(t, chromedp.Run(ctx,
		chromedp.Click("#confirm", chromedp.ByQuery),
		chromedp.WaitVisible("#flash", chromedp.ByQuery),
		chromedp.Text("#flash", &flash, chromedp.ByQuery),
		chromedp.Location(&href),
	))
	assert.Equal(t, "The job was stopped.", flash)
	assert.Contains(t, href, "/pool/"+name+"?done=stopped")
	_, err = pool.InspectJob(ctx, srv.Client(), name, "alpha")
	assert.ErrorIs(t, err, pool.ErrJobNotFound, "the job is gone from Redis")
	assert.True(t, h.wasStopped("alpha"), "its worker's Stop ran")
	_, err = pool.InspectJob(ctx, srv.Client(), name, "beta")
	assert.NoError(t, err, "the other job runs on")

	// The stopped job's page says so.
	var msg string
	require.NoError(t, chromedp.Run(ctx,
		chromedp.Navigate(base+"/pool/"+name+"/job/alpha"),
		chromedp.WaitVisible("#error-message", chromedp.ByQuery),
		chromedp.Text("#error-message", &msg, chromedp.ByQuery),
	))
	assert.Contains(t, msg, "not found")
}

func TestShuttingAPoolDownFromTheBrowser(t *testing.T) {
	t.Parallel()
	name, _, h := livePool(t, 1, "one", "two")
	_, base := serve(t, WithRefreshEvery(static))
	ctx := tab(t, 30*time.Second)
	var flash string
	require.NoError(t, chromedp.Run(ctx,
		chromedp.Navigate(base+"/pool/"+name),
		chromedp.WaitVisible("#shutdown", chromedp.ByQuery),
		chromedp.Click("#shutdown", chromedp.ByQuery),
		chromedp.WaitVisible("#confirm", chromedp.ByQuery),
		chromedp.Click("#confirm", chromedp.ByQuery),
		chromedp.WaitVisible("#flash", chromedp.ByQuery),
		chromedp.Text("#flash", &flash, chromedp.ByQuery),
	))
	assert.Equal(t, "The pool was shut down.", flash)
	ok, err := pool.Exists(ctx, srv.Client(), name)
	require.NoError(t, err)
	assert.False(t, ok, "Redis holds nothing of the pool")
	assert.True(t, h.wasStopped("one") && h.wasStopped("two"), "its jobs were stopped")
}

func TestQueuePageAndItsActions(t *testing.T) {
	t.Parallel()
	q, s, failing := liveQueue(t, "d1", "d2")
	ctx := tab(t, 40*time.Second)
	require.NoError(t, q.SetTenant(ctx, "acme", 3))
	_, base := serve(t, WithRefreshEvery(static))
	page := base + "/queue/" + q.Name()

	var deadIDs []string
	var capacity, deadCount string
	require.NoError(t, chromedp.Run(ctx,
		chromedp.Navigate(page),
		chromedp.WaitVisible("#dead", chromedp.ByQuery),
		chromedp.Evaluate(`Array.from(document.querySelectorAll('#dead tbody tr')).map(tr => tr.dataset.task)`, &deadIDs),
		chromedp.Text("#dead-count", &deadCount, chromedp.ByQuery),
		chromedp.Text(`#tenants tr[data-tenant="acme"] [data-field=capacity]`, &capacity, chromedp.ByQuery),
	))
	assert.ElementsMatch(t, []string{"d1", "d2"}, deadIDs)
	assert.Equal(t, "2", deadCount)
	assert.Equal(t, "0 / 3", capacity)

	confirm := func(click string) {
		t.Helper()
		require.NoError(t, chromedp.Run(ctx,
			chromedp.Click(click, chromedp.ByQuery),
			chromedp.WaitVisible("#confirm", chromedp.ByQuery),
			chromedp.Click("#confirm", chromedp.ByQuery),
			chromedp.WaitVisible("#flash", chromedp.ByQuery),
		))
	}

	// Replay d1: it runs again, and succeeds this time.
	failing.Store(false)
	confirm(`#dead tr[data-task="d1"] button.replay`)
	require.Eventually(t, func() bool {
		res, err := q.Result(ctx, "d1")
		return err == nil && string(res) == "done"
	}, 10*time.Second, 20*time.Millisecond, "the replayed dead letter ran")

	// Delete d2.
	confirm(`#dead tr[data-task="d2"] button.delete`)
	_, err := q.Inspect(ctx, "d2")
	assert.ErrorIs(t, err, queue.ErrTaskNotFound, "the dead letter is deleted")

	// Set acme's capacity.
	row := `#tenants tr[data-tenant="acme"] `
	require.NoError(t, chromedp.Run(ctx,
		chromedp.Focus(row+"input[name=capacity]", chromedp.ByQuery),
		chromedp.SetValue(row+"input[name=capacity]", "7", chromedp.ByQuery),
	))
	confirm(row + "button.set-capacity")
	tenants, err := q.Tenants(ctx)
	require.NoError(t, err)
	require.Len(t, tenants, 1)
	assert.EqualValues(t, 7, tenants[0].Capacity)

	// Drain: the serving process stops serving once it is idle.
	confirm("#drain")
	select {
	case <-s.Done():
	case <-time.After(10 * time.Second):
		t.Fatal("the server did not drain")
	}
	assert.Equal(t, queue.ModeDrain, s.Mode())
}

func TestTaskPageShowsADeadLetter(t *testing.T) {
	t.Parallel()
	q, _, _ := liveQueue(t, "<img src=x onerror=alert(1)>")
	_, base := serve(t, WithRefreshEvery(static))
	ctx := tab(t, 30*time.Second)
	var id, state, errText string
	var images int
	require.NoError(t, chromedp.Run(ctx,
		chromedp.Navigate(base+"/queue/"+q.Name()),
		chromedp.WaitVisible("#dead", chromedp.ByQuery),
		chromedp.Click("#dead tbody tr a", chromedp.ByQuery),
		chromedp.WaitVisible("#task", chromedp.ByQuery),
		chromedp.Text("#task-id", &id, chromedp.ByQuery),
		chromedp.Text("#state", &state, chromedp.ByQuery),
		chromedp.Text("#errors .error-text", &errText, chromedp.ByQuery),
		chromedp.Evaluate(`document.querySelectorAll('img').length`, &images),
	))
	assert.Equal(t, "<img src=x onerror=alert(1)>", id, "the id is shown as text")
	assert.Equal(t, "dead", state)
	assert.Equal(t, "cannot do <b>this</b>", errText, "the error is shown as text")
	assert.Zero(t, images, "no markup of the task's came through")
}

func TestReadOnlyOffersNoAction(t *testing.T) {
	t.Parallel()
	name, _, _ := livePool(t, 1, "k")
	q, _, _ := liveQueue(t, "dead")
	_, base := serve(t, WithReadOnly(true), WithRefreshEvery(static))
	ctx := tab(t, 30*time.Second)
	for _, path := range []string{"/pool/" + name, "/pool/" + name + "/job/k", "/queue/" + q.Name(), "/queue/" + q.Name() + "/task/dead"} {
		var forms, badge int
		require.NoError(t, chromedp.Run(ctx,
			chromedp.Navigate(base+path),
			chromedp.WaitVisible("main", chromedp.ByQuery),
			chromedp.Evaluate(`document.querySelectorAll('form[method=post]').length`, &forms),
			chromedp.Evaluate(`document.querySelectorAll('.badge.readonly').length`, &badge),
		))
		assert.Zero(t, forms, "%s offers no action", path)
		assert.Equal(t, 1, badge, "%s says it is read-only", path)
	}
}

func TestTokenInTheBrowser(t *testing.T) {
	t.Parallel()
	name, _, _ := livePool(t, 1, "k")
	_, base := serve(t, WithToken("s3cret"), WithRefreshEvery(static))
	ctx := tab(t, 30*time.Second)
	var msg, href string
	require.NoError(t, chromedp.Run(ctx,
		chromedp.Navigate(base+"/pool/"+name),
		chromedp.WaitVisible("#error-message", chromedp.ByQuery),
		chromedp.Text("#error-message", &msg, chromedp.ByQuery),
	))
	assert.Contains(t, msg, "needs its token")
	require.NoError(t, chromedp.Run(ctx,
		chromedp.Navigate(base+"/pool/"+name+"?token=s3cret"),
		chromedp.WaitVisible("#workers", chromedp.ByQuery),
		chromedp.Location(&href),
	))
	assert.NotContains(t, href, "s3cret", "the token leaves the address bar")
	// The cookie carries it from now on, to the actions too.
	require.NoError(t, chromedp.Run(ctx,
		chromedp.Navigate(base+"/pool/"+name+"/job/k"),
		chromedp.WaitVisible("#stop", chromedp.ByQuery),
		chromedp.Click("#stop", chromedp.ByQuery),
		chromedp.WaitVisible("#confirm", chromedp.ByQuery),
		chromedp.Click("#confirm", chromedp.ByQuery),
		chromedp.WaitVisible("#flash", chromedp.ByQuery),
	))
	_, err := pool.InspectJob(ctx, srv.Client(), name, "k")
	assert.ErrorIs(t, err, pool.ErrJobNotFound)
}

func TestLiveUpdatesWithoutReload(t *testing.T) {
	t.Parallel()
	name, n, _ := livePool(t, 2, "a", "b")
	_, base := serve(t, WithRefreshEvery(200*time.Millisecond))
	ctx := tab(t, 30*time.Second)
	var jobs string
	require.NoError(t, chromedp.Run(ctx,
		chromedp.Navigate(base+"/pool/"+name),
		chromedp.WaitVisible("#jobs", chromedp.ByQuery),
		chromedp.Text("#jobs", &jobs, chromedp.ByQuery),
		chromedp.Evaluate(`window.marker = 42`, nil),
	))
	assert.Equal(t, "2", jobs)
	for _, k := range []string{"c", "d", "e"} {
		require.NoError(t, n.DispatchJob(ctx, k, nil))
	}
	var marker int
	require.NoError(t, chromedp.Run(ctx,
		chromedp.Poll(`document.getElementById('jobs').textContent === '5'`, nil, chromedp.WithPollingTimeout(10*time.Second)),
		chromedp.Evaluate(`window.marker`, &marker),
	))
	assert.Equal(t, 42, marker, "the page updated in place: a reload would have lost the marker")
}

// The 401 page a browser gets without the token is styled like the
// others, and says how to pass the token.
func TestUnauthorizedPageIsStyledInTheBrowser(t *testing.T) {
	t.Parallel()
	_, base := serve(t, WithToken("tok-123"), WithRefreshEvery(static))
	ctx := tab(t, 30*time.Second)
	var rules int
	var msg string
	require.NoError(t, chromedp.Run(ctx,
		chromedp.Navigate(base+"/"),
		chromedp.WaitVisible("#error-message", chromedp.ByQuery),
		chromedp.Poll(`document.readyState === 'complete'`, nil, chromedp.WithPollingTimeout(5*time.Second)),
		chromedp.Evaluate(`Array.from(document.styleSheets).reduce((n, s) => n + s.cssRules.length, 0)`, &rules),
		chromedp.Text("#error-message", &msg, chromedp.ByQuery),
	))
	assert.Positive(t, rules, "the stylesheet loaded")
	assert.Contains(t, msg, "?token=")
	assert.Contains(t, msg, "Authorization: Bearer")
}

// The live-state clock is in UTC, in the pages' format, whatever the
// browser's time zone.
func TestLiveStateShowsUTC(t *testing.T) {
	t.Parallel()
	name, _, _ := livePool(t, 1, "a")
	_, base := serve(t, WithRefreshEvery(200*time.Millisecond))
	ctx := tab(t, 30*time.Second)
	var state string
	require.NoError(t, chromedp.Run(ctx,
		emulation.SetTimezoneOverride("Asia/Kolkata"), // UTC+5:30: a local clock differs from UTC
		chromedp.Navigate(base+"/pool/"+name),
		chromedp.Poll(`document.getElementById('live-state').textContent.startsWith('live')`, nil, chromedp.WithPollingTimeout(10*time.Second)),
		chromedp.Text("#live-state", &state, chromedp.ByQuery),
	))
	assert.Regexp(t, `^live \d{4}-\d\d-\d\d \d\d:\d\d:\d\d UTC$`, state)
	shown, err := time.Parse("live 2006-01-02 15:04:05 UTC", state)
	require.NoError(t, err)
	assert.WithinDuration(t, time.Now(), shown, time.Minute, "the time shown is UTC, not the browser's local time")
}

// TestScreenshots writes PNGs of the main pages to $SHEPHERD_SCREENSHOTS
// (default: a temporary directory), for people to look at.
func TestScreenshots(t *testing.T) {
	t.Parallel()
	// Names that read well in docs/dashboard.md; the suffix keeps them unique.
	unique := redistest.Name(t)
	suffix := unique[len(unique)-8:]
	name, n, _ := namedPool(t, "ingest-"+suffix, 4, keysN("tenant", 23)...)
	q, _, _ := namedQueue(t, "thumbnails-"+suffix, "invoice-17", "invoice-18")
	ctx := tab(t, 40*time.Second)
	require.NoError(t, q.SetTenant(ctx, "acme", 4))
	_, base := serve(t, WithRefreshEvery(static))
	dir := os.Getenv("SHEPHERD_SCREENSHOTS")
	if dir == "" {
		dir = t.TempDir()
	}
	require.NoError(t, os.MkdirAll(dir, 0o755))
	require.NoError(t, chromedp.Run(ctx, chromedp.Navigate(base+"/pool/"+name), chromedp.WaitVisible("main", chromedp.ByQuery)))
	for i := range 5 {
		require.NoError(t, n.DispatchJob(ctx, fmt.Sprintf("late-%d", i), nil))
		time.Sleep(100 * time.Millisecond) // samples for the chart
	}
	shots := map[string]string{
		"overview.png": "/",
		"pool.png":     "/pool/" + name,
		"job.png":      "/pool/" + name + "/job/tenant-07",
		"queue.png":    "/queue/" + q.Name(),
	}
	for file, path := range shots {
		var png []byte
		require.NoError(t, chromedp.Run(ctx,
			chromedp.Navigate(base+path),
			chromedp.WaitVisible("main", chromedp.ByQuery),
			chromedp.CaptureScreenshot(&png),
		))
		require.True(t, len(png) > 1000 && string(png[1:4]) == "PNG", "%s is a PNG", file)
		out := dir + "/" + file
		require.NoError(t, os.WriteFile(out, png, 0o644))
		t.Logf("wrote %s (%d bytes)", out, len(png))
	}
}
