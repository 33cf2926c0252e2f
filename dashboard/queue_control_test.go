package dashboard

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/shepherd-go/shepherd/internal/jsonstyle"
	"github.com/shepherd-go/shepherd/internal/redistest"
	"github.com/shepherd-go/shepherd/queue"
)

// TestQueuePauseAndRatesOverHTTP: the queue page shows whether the
// queue is paused and its rate limit, and the tenants' rates and pauses;
// the six actions ask first, act, and refuse bad input with 400.
func TestQueuePauseAndRatesOverHTTP(t *testing.T) {
	t.Parallel()
	q, _, _ := liveQueue(t)
	ctx := testCtx(t, 30*time.Second)
	require.NoError(t, q.SetTenant(ctx, "acme", 3))
	d, base := serve(t)
	page := base + "/queue/" + url.PathEscape(q.Name())
	csrf := "csrf=" + d.csrfToken()
	stats := func() queue.Stats {
		t.Helper()
		st, err := q.Stats(ctx)
		require.NoError(t, err)
		return st
	}
	acme := func() queue.TenantInfo {
		t.Helper()
		st := stats()
		require.Len(t, st.Tenants, 1)
		return st.Tenants[0]
	}
	// act posts an action with confirm=yes and checks that it redirects
	// to the queue page with its message.
	act := func(action, form, done string) {
		t.Helper()
		resp, body := request(t, http.MethodPost, page+"/"+action, form+"&confirm=yes&"+csrf)
		require.Equal(t, http.StatusSeeOther, resp.StatusCode, "%s: %s", action, body)
		assert.Equal(t, "/queue/"+url.PathEscape(q.Name())+"?done="+done, resp.Header.Get("Location"), action)
	}

	code, body := get(t, page)
	require.Equal(t, http.StatusOK, code, body)
	assert.Contains(t, body, `id="queue-state">running<`)
	assert.Contains(t, body, `id="queue-rate">none<`)
	assert.Contains(t, body, `id="pause"`)
	assert.NotContains(t, body, `id="resume"`)
	assert.Contains(t, body, `<input type="text" name="rate" id="rate" value="none"`)
	assert.Contains(t, body, `<td data-field="rate">none</td>`)
	assert.Contains(t, body, `<td data-field="starts">running</td>`)

	// Pause asks first, then pauses.
	code, body = post(t, page+"/pause", csrf)
	require.Equal(t, http.StatusOK, code, body)
	assert.Contains(t, body, `id="confirm"`)
	assert.Contains(t, body, "Tasks in flight finish")
	assert.False(t, stats().Paused, "nothing happens before the confirmation")
	act("pause", "x=1", "paused")
	assert.True(t, stats().Paused)
	code, body = get(t, page+"?done=paused")
	require.Equal(t, http.StatusOK, code, body)
	assert.Contains(t, body, "The queue was paused")
	assert.Contains(t, body, `id="queue-state">paused<`)
	assert.Contains(t, body, `id="resume"`)
	assert.NotContains(t, body, `id="pause"`)
	var ov Listing
	code, body = get(t, base+"/?format=json")
	require.Equal(t, http.StatusOK, code, body)
	require.NoError(t, json.Unmarshal([]byte(body), &ov))
	for _, row := range ov.Queues {
		if row.Name == q.Name() {
			assert.Equal(t, "warn", row.Health, "a paused queue is flagged on the overview")
			assert.Contains(t, row.Problem, "paused")
		}
	}
	act("resume", "x=1", "resumed")
	assert.False(t, stats().Paused)

	// The queue's rate.
	code, body = post(t, page+"/rate", "rate=500/1s&"+csrf)
	require.Equal(t, http.StatusOK, code, body)
	assert.Contains(t, body, "500/1s, burst 10", "the question names the rate and its burst")
	assert.True(t, stats().Rate.IsZero(), "nothing happens before the confirmation")
	act("rate", "rate=500/1s", "rate")
	assert.Equal(t, queue.Rate{N: 500, Per: time.Second}, stats().Rate)
	code, body = get(t, page)
	require.Equal(t, http.StatusOK, code, body)
	assert.Contains(t, body, `id="queue-rate">500/1s, burst 10<`)
	assert.Contains(t, body, `id="rate" value="500/1s"`)
	for _, bad := range []string{"0", "", " ", "fast", "0/1s", "-1/1s", "500/0s", "500/1s+0", "500/1s+501"} {
		for _, confirm := range []string{"", "&confirm=yes"} {
			code, body := post(t, page+"/rate", "rate="+url.QueryEscape(bad)+confirm+"&"+csrf)
			assert.Equal(t, http.StatusBadRequest, code, "rate %q: %s", bad, body)
		}
	}
	code, body = post(t, page+"/rate", "rate=0&confirm=yes&"+csrf, "Accept", "application/json")
	assert.Equal(t, http.StatusBadRequest, code)
	assert.Contains(t, body, "ambiguous")
	assert.Equal(t, queue.Rate{N: 500, Per: time.Second}, stats().Rate, "no bad rate was set")
	act("rate", "rate=none", "rate")
	assert.True(t, stats().Rate.IsZero(), "none removes the rate")

	// A tenant's pause and rate.
	act("tenant/pause", "tenant=acme", "tenant-paused")
	assert.True(t, acme().Paused)
	assert.False(t, stats().Paused, "the queue runs on")
	act("tenant/rate", "tenant=acme&rate=50/1s%2B5", "tenant-rate")
	assert.Equal(t, queue.Rate{N: 50, Per: time.Second, Burst: 5}, acme().Rate)
	code, body = get(t, page)
	require.Equal(t, http.StatusOK, code, body)
	assert.Contains(t, body, `<td data-field="rate">50/1s, burst 5</td>`)
	assert.Contains(t, body, `<td data-field="starts"><span class="badge warn">paused</span></td>`)
	assert.Contains(t, body, `<button type="submit" class="resume">Resume</button>`)
	act("tenant/resume", "tenant=acme", "tenant-resumed")
	assert.False(t, acme().Paused)
	for _, tc := range []struct{ action, form string }{
		{"tenant/pause", "tenant=nobody"}, {"tenant/resume", "tenant=nobody"}, {"tenant/rate", "tenant=nobody&rate=5/1s"},
		{"tenant/pause", "x=1"}, {"tenant/rate", "rate=5/1s"}, {"tenant/rate", "tenant=acme&rate=bogus"}, {"tenant/rate", "tenant=acme&rate=0"},
	} {
		code, body := post(t, page+"/"+tc.action, tc.form+"&confirm=yes&"+csrf)
		assert.Equal(t, http.StatusBadRequest, code, "%s %s: %s", tc.action, tc.form, body)
	}
	assert.Equal(t, queue.Rate{N: 50, Per: time.Second, Burst: 5}, acme().Rate, "no bad rate was set")
	assert.Len(t, stats().Tenants, 1, "no tenant was made up")

	// Without the CSRF token, nothing happens.
	for _, action := range []string{"pause", "rate", "tenant/pause"} {
		code, _ := post(t, page+"/"+action, "tenant=acme&rate=5/1s&confirm=yes")
		assert.Equal(t, http.StatusForbidden, code, action)
	}
	assert.False(t, stats().Paused)
	assert.False(t, acme().Paused)
}

// TestQueueControlIsHiddenAndRefusedWhenReadOnly: a read-only dashboard
// shows the pause and the rates but offers no action, and refuses the
// actions' POSTs.
func TestQueueControlIsHiddenAndRefusedWhenReadOnly(t *testing.T) {
	t.Parallel()
	q, _, _ := liveQueue(t)
	ctx := testCtx(t, 30*time.Second)
	require.NoError(t, q.SetTenant(ctx, "acme", 3))
	require.NoError(t, q.SetTenantRate(ctx, "acme", queue.Rate{N: 50, Per: time.Second}))
	require.NoError(t, q.Pause(ctx))
	d, base := serve(t, WithReadOnly(true))
	page := base + "/queue/" + url.PathEscape(q.Name())

	code, body := get(t, page)
	require.Equal(t, http.StatusOK, code, body)
	assert.Contains(t, body, `id="queue-state">paused<`)
	assert.Contains(t, body, `<td data-field="rate">50/1s, burst 1</td>`)
	assert.NotContains(t, body, `method="post"`)
	for _, action := range []string{"pause", "resume", "rate", "tenant/pause", "tenant/resume", "tenant/rate"} {
		code, _ := post(t, page+"/"+action, "tenant=acme&rate=none&confirm=yes&csrf="+d.csrfToken())
		assert.Equal(t, http.StatusForbidden, code, action)
	}
	st, err := q.Stats(ctx)
	require.NoError(t, err)
	assert.True(t, st.Paused)
	assert.Equal(t, queue.Rate{N: 50, Per: time.Second}, st.Tenants[0].Rate)
}

// TestTaskPagesShowPriority: a task's page, the task lists and the dead
// letters show each task's priority.
func TestTaskPagesShowPriority(t *testing.T) {
	t.Parallel()
	ctx := testCtx(t, 30*time.Second)
	q, err := queue.Open(ctx, srv.Client(), redistest.Name(t))
	require.NoError(t, err)
	t.Cleanup(func() { _ = q.Close(ctx) })
	for id, p := range map[string]int{"urgent": 9, "normal": 0, "mid": 4} {
		opts := []queue.SubmitOption{queue.WithTaskID(id), queue.WithPriority(p)}
		if id == "urgent" {
			opts = append(opts, queue.WithDedup("<order-7>", time.Minute))
		}
		_, err := q.Submit(ctx, []byte("x"), opts...)
		require.NoError(t, err)
	}
	_, base := serve(t)
	page := base + "/queue/" + url.PathEscape(q.Name())

	code, body := get(t, page+"/task/urgent")
	require.Equal(t, http.StatusOK, code, body)
	assert.Contains(t, body, `<dt>Priority</dt><dd id="priority">9</dd>`)
	assert.Contains(t, body, `<dd class="mono" id="dedup-key">&lt;order-7&gt;</dd>`, "the dedup key, escaped")
	code, body = get(t, page+"/tasks?state=waiting")
	require.Equal(t, http.StatusOK, code, body)
	assert.Contains(t, body, `<th>Priority</th>`)
	for id, p := range map[string]int{"urgent": 9, "normal": 0, "mid": 4} {
		assert.Regexp(t, fmt.Sprintf(`<tr data-task="%s">\n<td[^\n]*<td class="num" data-field="priority">%d</td>`, id, p), body)
	}
	tv := twin(t, page+"/task/mid?format=json")
	assert.EqualValues(t, 4, jsonstyle.At(tv, "task.priority"))
}

// TestPauseResumeAndTenantRateInTheBrowser: an operator pauses the queue
// and resumes it, and sets a tenant's rate, by clicking through the
// confirmations; a task submitted while the queue is paused runs after
// the resume.
func TestPauseResumeAndTenantRateInTheBrowser(t *testing.T) {
	t.Parallel()
	q, _, _ := liveQueue(t)
	ctx := tab(t, 40*time.Second)
	require.NoError(t, q.SetTenant(ctx, "acme", 2))
	_, base := serve(t, WithRefreshEvery(static))
	page := base + "/queue/" + q.Name()

	var state, flash, question string
	require.NoError(t, chromedp.Run(ctx,
		chromedp.Navigate(page),
		chromedp.WaitVisible("#pause", chromedp.ByQuery),
		chromedp.Text("#queue-state", &state, chromedp.ByQuery),
	))
	assert.Equal(t, "running", state)

	// clickThrough clicks an action, reads its question, confirms it and
	// reads the message on the page it lands on.
	clickThrough := func(click string) {
		t.Helper()
		require.NoError(t, chromedp.Run(ctx,
			chromedp.Click(click, chromedp.ByQuery),
			chromedp.WaitVisible("#confirm", chromedp.ByQuery),
			chromedp.Text("#question", &question, chromedp.ByQuery),
			chromedp.Click("#confirm", chromedp.ByQuery),
			chromedp.WaitVisible("#flash", chromedp.ByQuery),
			chromedp.Text("#flash", &flash, chromedp.ByQuery),
		))
	}

	clickThrough("#pause")
	assert.Contains(t, question, "Pause queue")
	assert.Contains(t, flash, "The queue was paused")
	require.NoError(t, chromedp.Run(ctx,
		chromedp.WaitVisible("#resume", chromedp.ByQuery),
		chromedp.Text("#queue-state", &state, chromedp.ByQuery),
	))
	assert.Equal(t, "paused", state)
	st, err := q.Stats(ctx)
	require.NoError(t, err)
	require.True(t, st.Paused, "the pause is stored with the queue")
	f, err := q.Submit(ctx, []byte("while paused"))
	require.NoError(t, err)

	clickThrough("#resume")
	assert.Equal(t, "The queue was resumed.", flash)
	require.NoError(t, chromedp.Run(ctx,
		chromedp.WaitVisible("#pause", chromedp.ByQuery),
		chromedp.Text("#queue-state", &state, chromedp.ByQuery),
	))
	assert.Equal(t, "running", state)
	res, err := f.Wait(ctx)
	require.NoError(t, err, "the task submitted while paused runs after the resume")
	assert.Equal(t, "done", string(res))

	// acme's rate.
	row := `#tenants tr[data-tenant="acme"] `
	var rate string
	require.NoError(t, chromedp.Run(ctx,
		chromedp.Text(row+"[data-field=rate]", &rate, chromedp.ByQuery),
		chromedp.SetValue(row+"input.rate", "50/1s", chromedp.ByQuery),
	))
	assert.Equal(t, "none", rate)
	clickThrough(row + "button.set-rate")
	assert.Contains(t, question, `tenant "acme" to 50/1s, burst 1`)
	assert.Equal(t, "The tenant's rate limit was set.", flash)
	require.NoError(t, chromedp.Run(ctx, chromedp.Text(row+"[data-field=rate]", &rate, chromedp.ByQuery)))
	assert.Equal(t, "50/1s, burst 1", rate)
	tenants, err := q.Tenants(ctx)
	require.NoError(t, err)
	require.Len(t, tenants, 1)
	assert.Equal(t, queue.Rate{N: 50, Per: time.Second}, tenants[0].Rate)

	// A bad rate is refused with the reason, and changes nothing.
	var msg string
	require.NoError(t, chromedp.Run(ctx,
		chromedp.SetValue(row+"input.rate", "fast", chromedp.ByQuery),
		chromedp.Click(row+"button.set-rate", chromedp.ByQuery),
		chromedp.WaitVisible("#error-message", chromedp.ByQuery),
		chromedp.Text("#error-message", &msg, chromedp.ByQuery),
	))
	assert.True(t, strings.Contains(msg, "want N/DURATION"), msg)
	tenants, err = q.Tenants(ctx)
	require.NoError(t, err)
	assert.Equal(t, queue.Rate{N: 50, Per: time.Second}, tenants[0].Rate)
}
