package dashboard

import (
	"fmt"
	"net/http"
	"net/url"
	"regexp"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/shepherd-go/shepherd/queue"
)

// actOn posts an action's form with the CSRF token and confirm=yes, and
// returns where it redirects to; it fails the test unless it is a 303.
func actOn(t *testing.T, d *Handler, url, form string) string {
	t.Helper()
	resp, body := request(t, http.MethodPost, url, form+"&confirm=yes&csrf="+d.csrfToken())
	require.Equal(t, http.StatusSeeOther, resp.StatusCode, body)
	return resp.Header.Get("Location")
}

// flashOf is the flash message of a page, as its HTML has it.
func flashOf(t *testing.T, base, location string) string {
	t.Helper()
	code, body := get(t, base+location)
	require.Equal(t, http.StatusOK, code, body)
	return regexpFind(`<p class="flash" id="flash">([^<]*)</p>`, body)
}

func TestDeadLettersInBulkOverHTTP(t *testing.T) {
	t.Parallel()
	q, _, failing := liveQueue(t, "d1", "d2", "d3", hostileID)
	ctx := testCtx(t, 30*time.Second)
	d, base := serve(t)
	page := base + "/queue/" + q.Name()
	deadList := "/queue/" + q.Name() + "/tasks?state=dead"

	// The list offers the selection and the actions on all, the hostile
	// id escaped.
	code, body := get(t, base+deadList)
	require.Equal(t, http.StatusOK, code, body)
	assert.Contains(t, body, `<input type="checkbox" name="id" value="d1" form="bulk"`)
	assert.Contains(t, body, `value="&lt;script&gt;alert(1)&lt;/script&gt;" form="bulk"`)
	assert.NotContains(t, body, hostileID)
	for _, id := range []string{`id="replay-selected"`, `id="delete-selected"`, `id="replay-all"`, `id="purge"`, `id="select-all"`} {
		assert.Contains(t, body, id)
	}
	assert.NotContains(t, body, `id="cancel-selected"`, "a dead letter cannot be cancelled")

	// Replaying two asks first, naming both, and keeps both in its form.
	code, body = post(t, page+"/replay", "id=d1&id="+url.QueryEscape(hostileID)+"&from=dead&csrf="+d.csrfToken())
	require.Equal(t, http.StatusOK, code, body)
	assert.Contains(t, body, `id="confirm"`)
	assert.Contains(t, body, "these 2 dead letters")
	assert.Contains(t, body, `<input type="hidden" name="id" value="d1">`)
	assert.Contains(t, body, `<input type="hidden" name="id" value="&lt;script&gt;alert(1)&lt;/script&gt;">`)
	assert.NotContains(t, body, hostileID)
	assert.Contains(t, body, `href="/queue/`+q.Name()+`/tasks?state=dead" class="cancel"`, "Cancel goes back to the list")
	info, err := q.Inspect(ctx, "d1")
	require.NoError(t, err)
	assert.Equal(t, queue.StateDead, info.State, "nothing happens before the confirmation")

	// Confirmed: both run again and succeed; back to the list, which says
	// how many.
	failing.Store(false)
	to := actOn(t, d, page+"/replay", "id=d1&id="+url.QueryEscape(hostileID)+"&from=dead")
	assert.Equal(t, deadList+"&done=replayed&n=2", to)
	for _, id := range []string{"d1", hostileID} {
		require.Eventually(t, func() bool {
			res, err := q.Result(ctx, id)
			return err == nil && string(res) == "done"
		}, 10*time.Second, 20*time.Millisecond, "%s ran again", id)
	}
	assert.Equal(t, "2 dead letters queued again.", flashOf(t, base, to))

	// Deleting one that is and one that is no longer a dead letter.
	to = actOn(t, d, page+"/delete", "id=d2&id=d1&from=dead")
	assert.Equal(t, deadList+"&done=deleted&missing=1&n=1", to)
	assert.Equal(t, "1 dead letter deleted. 1 no longer dead letters (replayed or deleted meanwhile).", flashOf(t, base, to))
	_, err = q.Inspect(ctx, "d2")
	assert.ErrorIs(t, err, queue.ErrTaskNotFound)

	// One id alone keeps the single action's answers: 404 when it is no
	// dead letter, and the queue page's message.
	code, _ = post(t, page+"/replay", "id=d1&confirm=yes&csrf="+d.csrfToken())
	assert.Equal(t, http.StatusNotFound, code)
	assert.Equal(t, "/queue/"+q.Name()+"?done=deleted", actOn(t, d, page+"/delete", "id=d3"))

	// Replay all: every dead letter, counted; then purge all.
	failing.Store(true)
	for _, id := range []string{"e1", "e2", "e3"} {
		f, err := q.Submit(ctx, []byte("fail"), queue.WithTaskID(id))
		require.NoError(t, err)
		<-f.Done()
	}
	failing.Store(false)
	code, body = post(t, page+"/replay-all", "from=dead&csrf="+d.csrfToken())
	require.Equal(t, http.StatusOK, code)
	assert.Contains(t, body, "Queue every dead letter")
	to = actOn(t, d, page+"/replay-all", "from=dead")
	assert.Equal(t, deadList+"&done=replayed&n=3", to)
	for _, id := range []string{"e1", "e2", "e3"} {
		require.Eventually(t, func() bool {
			res, err := q.Result(ctx, id)
			return err == nil && string(res) == "done"
		}, 10*time.Second, 20*time.Millisecond, "%s ran again", id)
	}

	failing.Store(true)
	for _, id := range []string{"f1", "f2"} {
		f, err := q.Submit(ctx, []byte("fail"), queue.WithTaskID(id))
		require.NoError(t, err)
		<-f.Done()
	}
	code, body = post(t, page+"/purge", "from=dead&csrf="+d.csrfToken())
	require.Equal(t, http.StatusOK, code)
	assert.Contains(t, body, "Delete every dead letter")
	st, err := q.Stats(ctx)
	require.NoError(t, err)
	assert.EqualValues(t, 2, st.Dead, "nothing happens before the confirmation")
	to = actOn(t, d, page+"/purge", "from=dead")
	assert.Equal(t, deadList+"&done=purged&n=2", to)
	assert.Equal(t, "2 dead letters purged.", flashOf(t, base, to))
	st, err = q.Stats(ctx)
	require.NoError(t, err)
	assert.Zero(t, st.Dead)

	// Bad forms.
	code, _ = post(t, page+"/replay", "confirm=yes&csrf="+d.csrfToken())
	assert.Equal(t, http.StatusBadRequest, code, "no task selected")
	many := url.Values{"confirm": {"yes"}, "csrf": {d.csrfToken()}}
	for i := range maxSelected + 1 {
		many.Add("id", fmt.Sprintf("x-%d", i))
	}
	code, _ = post(t, page+"/delete", many.Encode())
	assert.Equal(t, http.StatusBadRequest, code, "too many selected")
}

// A link cannot make a page say anything but the fixed messages with
// whole numbers.
func TestBulkFlashIsFixedText(t *testing.T) {
	t.Parallel()
	for qs, want := range map[string]string{
		"done=replayed&n=2":                       "2 dead letters queued again.",
		"done=replayed":                           "The dead letter was queued again.",
		"done=cancelled&n=1&missing=3":            "1 task cancelled (one in flight finishes as cancelled when its attempt ends). 3 not found, or finished already.",
		"done=replayed&n=0&refused=2&left=7":      "0 dead letters queued again. 2 refused: their tenant was removed. 7 more left: replay all again.",
		"done=purged&n=%3Cb%3E":                   "0 dead letters purged.",
		"done=%3Cscript%3E&n=1":                   "",
		"done=tenant-removed":                     flashes["tenant-removed"],
		"done=deleted&n=-4&missing=x":             "0 dead letters deleted.",
		"done=purged&n=3&missing=2":               "3 dead letters purged.",
		"done=cancelled&n=2&refused=0&left=0&x=1": "2 tasks cancelled (one in flight finishes as cancelled when its attempt ends).",
	} {
		v, err := url.ParseQuery(qs)
		require.NoError(t, err)
		assert.Equal(t, want, flashFor(v), qs)
	}
}

func TestCancelSelectedTasksOverHTTP(t *testing.T) {
	t.Parallel()
	q := waitingQueue(t, 3, 2)
	ctx := testCtx(t, 30*time.Second)
	d, base := serve(t)
	page := base + "/queue/" + q.Name()
	list := "/queue/" + q.Name() + "/tasks"

	for _, st := range []string{"waiting", "delayed", "retry", "active"} {
		_, body := get(t, base+list+"?state="+st)
		if st == "waiting" || st == "delayed" { // the others are empty: no rows
			assert.Contains(t, body, `name="id"`, st)
		}
		assert.Contains(t, body, `id="cancel-selected"`, st)
		assert.Contains(t, body, `<input type="hidden" name="from" value="`+st+`">`, st)
		assert.NotContains(t, body, `id="replay-selected"`, st)
	}
	for _, st := range []string{"done", "cancelled"} {
		_, body := get(t, base+list+"?state="+st)
		assert.NotContains(t, body, `id="bulk"`, "a finished task is not selected: %s", st)
	}

	// Asks first.
	code, body := post(t, page+"/cancel", "id=p-00&id=later-1&from=waiting&csrf="+d.csrfToken())
	require.Equal(t, http.StatusOK, code, body)
	assert.Contains(t, body, `id="confirm"`)
	assert.Contains(t, body, "Cancel 2 task(s)")
	info, err := q.Inspect(ctx, "p-00")
	require.NoError(t, err)
	assert.Equal(t, queue.StateWaiting, info.State, "nothing happens before the confirmation")

	to := actOn(t, d, page+"/cancel", "id=p-00&id=later-1&from=waiting")
	assert.Equal(t, list+"?state=waiting&done=cancelled&n=2", to)
	for _, id := range []string{"p-00", "later-1"} {
		info, err := q.Inspect(ctx, id)
		require.NoError(t, err)
		assert.Equal(t, queue.StateCancelled, info.State, id)
	}
	info, err = q.Inspect(ctx, "p-01")
	require.NoError(t, err)
	assert.Equal(t, queue.StateWaiting, info.State, "an unselected task is left alone")
	_, body = get(t, base+list+"?state=cancelled")
	assert.ElementsMatch(t, []string{"p-00", "later-1"}, taskIDs(t, body), "the cancelled list has them")

	// Finished already, or unknown: counted as such, even alone; a
	// filtered list is returned to with its filter.
	to = actOn(t, d, page+"/cancel", "id=p-00&id=nope&from=waiting&filter=acme")
	assert.Equal(t, list+"?state=waiting&tenant=acme&done=cancelled&missing=2&n=0", to)
	to = actOn(t, d, page+"/cancel", "id=a-00&from=nonsense")
	assert.Equal(t, "/queue/"+q.Name()+"?done=cancelled&n=1", to, "an unknown from= goes to the queue page")
	to = actOn(t, d, page+"/cancel", "id=a-00&from=waiting")
	assert.Equal(t, list+"?state=waiting&done=cancelled&missing=1&n=0", to)
}

func TestBulkActionsRefusedReadOnlyAndWithoutCSRF(t *testing.T) {
	t.Parallel()
	q, _, _ := liveQueue(t, "d1")
	ctx := testCtx(t, 30*time.Second)
	require.NoError(t, q.SetTenant(ctx, "acme", 2))
	d, base := serve(t, WithReadOnly(true))
	page := base + "/queue/" + q.Name()
	actions := map[string]string{
		"replay": "id=d1", "delete": "id=d1", "cancel": "id=d1", "replay-all": "x=1", "purge": "x=1",
		"tenant/remove": "tenant=acme",
	}
	for action, form := range actions {
		code, _ := post(t, page+"/"+action, form+"&confirm=yes&csrf="+d.csrfToken())
		assert.Equal(t, http.StatusForbidden, code, "read-only: %s", action)
	}
	for _, path := range []string{"/tasks?state=dead", "/tasks?state=waiting", "/tenant/acme", ""} {
		code, body := get(t, page+path)
		require.Equal(t, http.StatusOK, code, path)
		assert.NotContains(t, body, `method="post"`, "read-only offers no action: %s", path)
		assert.NotContains(t, body, `type="checkbox"`, "read-only offers no selection: %s", path)
	}

	_, base = serve(t)
	page = base + "/queue/" + q.Name()
	for action, form := range actions {
		code, _ := post(t, page+"/"+action, form+"&confirm=yes")
		assert.Equal(t, http.StatusForbidden, code, "no CSRF token: %s", action)
	}
	info, err := q.Inspect(ctx, "d1")
	require.NoError(t, err)
	assert.Equal(t, queue.StateDead, info.State, "nothing happened")
	tenants, err := q.Tenants(ctx)
	require.NoError(t, err)
	require.Len(t, tenants, 1)
	assert.False(t, tenants[0].Removed)
}

func TestDoneAndCancelledListsAndTheSearchPerList(t *testing.T) {
	t.Parallel()
	q, _, _ := liveQueue(t, "dead-1")
	ctx := testCtx(t, 30*time.Second)
	require.NoError(t, q.SetTenant(ctx, "acme", 5))
	for _, id := range []string{"ok-1", "ok-2", "acme-1", "acme-2"} {
		var opts []queue.SubmitOption
		if id[:4] == "acme" {
			opts = append(opts, queue.WithTenant("acme"))
		}
		f, err := q.Submit(ctx, []byte("x"), append(opts, queue.WithTaskID(id))...)
		require.NoError(t, err)
		_, err = f.Wait(ctx)
		require.NoError(t, err)
	}
	f, err := q.Submit(ctx, []byte("x"), queue.WithTaskID("gone"), queue.WithDelay(time.Hour))
	require.NoError(t, err)
	require.NoError(t, q.Cancel(ctx, "gone"))
	_, err = f.Wait(ctx)
	require.ErrorIs(t, err, queue.ErrCancelled)
	_, base := serve(t)
	list := base + "/queue/" + q.Name() + "/tasks"

	// The queue page links both lists.
	_, body := get(t, base+"/queue/"+q.Name())
	for _, st := range []string{"done", "cancelled"} {
		assert.Contains(t, body, `href="/queue/`+q.Name()+`/tasks?state=`+st+`" id="list-`+st+`"`)
	}

	// Newest first, with their finish times.
	code, body := get(t, list+"?state=done")
	require.Equal(t, http.StatusOK, code, body)
	assert.Equal(t, []string{"acme-2", "acme-1", "ok-2", "ok-1"}, taskIDs(t, body))
	assert.Contains(t, body, "<th>Finished</th>")
	_, body = get(t, list+"?state=done&tenant=acme")
	assert.Equal(t, []string{"acme-2", "acme-1"}, taskIDs(t, body))
	assert.Contains(t, body, `href="/queue/`+q.Name()+`/tenant/acme" id="tenant-page"`)
	_, body = get(t, list+"?state=cancelled")
	assert.Equal(t, []string{"gone"}, taskIDs(t, body))

	// The search: in this list, to the task; in another, a 404 that says
	// where it is; nowhere, a 404; without a state, anywhere.
	resp, _ := request(t, http.MethodGet, list+"?state=done&id=ok-1", "")
	assert.Equal(t, http.StatusSeeOther, resp.StatusCode)
	assert.Equal(t, "/queue/"+q.Name()+"/task/ok-1", resp.Header.Get("Location"))
	code, body = get(t, list+"?state=done&id=dead-1")
	assert.Equal(t, http.StatusNotFound, code)
	assert.Contains(t, body, `task &#34;dead-1&#34; is not in this list: it is dead`)
	assert.Contains(t, body, `<a href="/queue/`+q.Name()+`/task/dead-1" id="elsewhere">`)
	code, body = get(t, list+"?state=done&tenant=acme&id=ok-1")
	assert.Equal(t, http.StatusNotFound, code, "another tenant's task is not in the tenant's list")
	assert.Contains(t, body, "is not in this list: it is done")
	code, body = get(t, list+"?state=cancelled&id="+url.QueryEscape("<i>x</i>"))
	assert.Equal(t, http.StatusNotFound, code)
	assert.Contains(t, body, "&lt;i&gt;x&lt;/i&gt;")
	assert.NotContains(t, body, "<i>x")
	resp, _ = request(t, http.MethodGet, list+"?id=gone", "")
	assert.Equal(t, http.StatusSeeOther, resp.StatusCode, "the queue page's search looks everywhere")

	// The queue page's search form looks everywhere: it sends no state.
	_, body = get(t, base+"/queue/"+q.Name())
	assert.NotContains(t, regexpFind(`(?s)<form[^>]*id="find-task">(.*?)</form>`, body), `name="state"`)

	// A tenant that is not registered is said to be so.
	_, body = get(t, list+"?state=done&tenant="+url.QueryEscape("<b>who</b>"))
	assert.Contains(t, body, `id="tenant-note">Tenant &lt;b&gt;who&lt;/b&gt; is not registered`)
	assert.Empty(t, taskIDs(t, body))
}

// pageOfTasks finds a tenant's task behind any number of others: the
// tenant's own list (queue.Client.TenantTasks), not a scan of the state's
// bounded by scanMax (which stopped before acme's task here).
func TestTenantFilterIsExact(t *testing.T) {
	t.Parallel()
	q := waitingQueue(t, 0, 0) // the hostile id and a delayed task
	ctx := testCtx(t, 60*time.Second)
	c, err := queue.NewClient(srv.Client(), q.Name())
	require.NoError(t, err)
	// Two chunks' worth of other tasks before one of acme's.
	for i := range 2*filterChunk - 1 {
		_, err := q.Submit(ctx, nil, queue.WithTaskID(fmt.Sprintf("u-%04d", i)))
		require.NoError(t, err)
	}
	_, err = q.Submit(ctx, nil, queue.WithTaskID("a-late"), queue.WithTenant("acme"))
	require.NoError(t, err)

	tasks, more, capped, err := pageOfTasks(ctx, c, queue.StateWaiting, "acme", 0, filterChunk)
	require.NoError(t, err)
	require.Len(t, tasks, 1, "acme's task, behind %d others", 2*filterChunk-1)
	assert.Equal(t, "a-late", tasks[0].ID)
	assert.False(t, more || capped)
}

// regexpFind returns the first group of re's first match in s, or "".
func regexpFind(re, s string) string {
	m := regexp.MustCompile(re).FindStringSubmatch(s)
	if m == nil {
		return ""
	}
	return m[1]
}
