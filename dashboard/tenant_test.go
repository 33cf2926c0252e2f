package dashboard

import (
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/shepherd-go/shepherd/internal/jsonstyle"
	"github.com/shepherd-go/shepherd/internal/redistest"
	"github.com/shepherd-go/shepherd/queue"
)

// hostileTenant is a tenant id that would run if a page did not escape
// it; its slash must stay inside the path's segment.
const hostileTenant = `<b onclick="x()">t/1</b>`

func TestTenantPageOverHTTP(t *testing.T) {
	t.Parallel()
	ctx := testCtx(t, 30*time.Second)
	q, err := queue.Open(ctx, srv.Client(), redistest.Name(t))
	require.NoError(t, err)
	t.Cleanup(func() { _ = q.Close(ctx) })
	require.NoError(t, q.SetTenant(ctx, "acme", 4))
	require.NoError(t, q.SetTenant(ctx, hostileTenant, 1))
	require.NoError(t, q.SetTenantRate(ctx, "acme", queue.Rate{N: 50, Per: time.Second}))
	for _, id := range []string{"t1", "t2", "t3"} {
		_, err := q.Submit(ctx, []byte("x"), queue.WithTaskID(id), queue.WithTenant("acme"))
		require.NoError(t, err)
	}
	_, err = q.Submit(ctx, []byte("x"), queue.WithTaskID("h1"), queue.WithTenant(hostileTenant))
	require.NoError(t, err)
	d, base := serve(t)
	qp := "/queue/" + q.Name()
	page := qp + "/tenant/acme"

	code, body := get(t, base+page)
	require.Equal(t, http.StatusOK, code, body)
	assert.Contains(t, body, `<h1 class="mono" id="tenant-id">acme</h1>`)
	assert.Contains(t, body, `<span id="load">0 / 4</span>`)
	assert.Contains(t, body, `<dd id="waiting">3</dd>`)
	assert.Contains(t, body, `<dd id="unfinished">3</dd>`)
	assert.Contains(t, body, `<dd id="tenant-rate">50/1s, burst 1</dd>`)
	assert.Contains(t, body, `<span class="badge ok">running</span>`)
	for _, st := range []string{"waiting", "delayed", "retry", "active", "done", "cancelled", "dead"} {
		assert.Contains(t, body, `href="`+qp+`/tasks?state=`+st+`&amp;tenant=acme"`, "a link to its %s tasks", st)
	}
	for _, action := range []string{"/tenant", "/tenant/pause", "/tenant/rate", "/tenant/remove"} {
		assert.Contains(t, body, `action="`+qp+action+`"`)
	}
	assert.Equal(t, 4, strings.Count(body, `<input type="hidden" name="from" value="tenant">`),
		"each of its four forms returns to it")

	// Linked from the queue page and from a task's page.
	_, body = get(t, base+qp)
	assert.Contains(t, body, `<a href="`+page+`">acme</a>`)
	_, body = get(t, base+qp+"/task/t1")
	assert.Contains(t, body, `<dd id="tenant"><a href="`+page+`">acme</a></dd>`)

	// A hostile id: escaped in the page, its slash kept in the segment.
	hostilePage := qp + "/tenant/" + url.PathEscape(hostileTenant)
	_, body = get(t, base+qp)
	assert.Contains(t, body, `href="`+hostilePage+`"`)
	assert.NotContains(t, body, hostileTenant)
	code, body = get(t, base+hostilePage)
	require.Equal(t, http.StatusOK, code, body)
	assert.Contains(t, body, `id="tenant-id">&lt;b onclick=&#34;x()&#34;&gt;t/1&lt;/b&gt;</h1>`)
	assert.NotContains(t, body, hostileTenant)
	assert.Contains(t, body, `<dd id="waiting">1</dd>`)

	// Unknown tenant and queue: 404, the id escaped.
	code, body = get(t, base+qp+"/tenant/"+url.PathEscape("<i>nobody</i>"))
	assert.Equal(t, http.StatusNotFound, code)
	assert.Contains(t, body, "&lt;i&gt;nobody&lt;/i&gt;")
	assert.NotContains(t, body, "<i>nobody")
	code, _ = get(t, base+"/queue/no-such-queue-"+q.Name()+"/tenant/acme")
	assert.Equal(t, http.StatusNotFound, code)

	// The JSON twin, in the CLI's style, holds the library's TenantInfo.
	tv := twin(t, base+page+"?format=json")
	assert.Equal(t, q.Name(), jsonstyle.At(tv, "queue"))
	ts, err := q.Tenants(ctx)
	require.NoError(t, err)
	for _, ti := range ts {
		if ti.ID == "acme" {
			assert.Equal(t, styled(t, ti), jsonstyle.At(tv, "tenant"))
		}
	}
	assert.EqualValues(t, 4, jsonstyle.At(tv, "tenant.capacity"))

	tenant := func(id string) queue.TenantInfo {
		t.Helper()
		ts, err := q.Tenants(ctx)
		require.NoError(t, err)
		for _, ti := range ts {
			if ti.ID == id {
				return ti
			}
		}
		t.Fatalf("no tenant %q", id)
		return queue.TenantInfo{}
	}

	// Its actions ask first, with Cancel back to its page, then return
	// to it with their message.
	code, body = post(t, base+qp+"/tenant/pause", "tenant=acme&from=tenant&csrf="+d.csrfToken())
	require.Equal(t, http.StatusOK, code, body)
	assert.Contains(t, body, `id="confirm"`)
	assert.Contains(t, body, `href="`+page+`" class="cancel"`)
	assert.False(t, tenant("acme").Paused, "nothing happens before the confirmation")
	assert.Equal(t, page+"?done=tenant-paused", actOn(t, d, base+qp+"/tenant/pause", "tenant=acme&from=tenant"))
	assert.True(t, tenant("acme").Paused)
	_, body = get(t, base+page+"?done=tenant-paused")
	assert.Contains(t, body, "The tenant was paused.")
	assert.Contains(t, body, `<span class="badge warn">paused</span>`)
	assert.Contains(t, body, `class="resume"`)
	assert.Equal(t, page+"?done=tenant-resumed", actOn(t, d, base+qp+"/tenant/resume", "tenant=acme&from=tenant"))
	assert.False(t, tenant("acme").Paused)
	assert.Equal(t, page+"?done=tenant", actOn(t, d, base+qp+"/tenant", "tenant=acme&capacity=9&from=tenant"))
	assert.EqualValues(t, 9, tenant("acme").Capacity)
	assert.Equal(t, page+"?done=tenant-rate", actOn(t, d, base+qp+"/tenant/rate", "tenant=acme&rate=none&from=tenant"))
	assert.True(t, tenant("acme").Rate.IsZero())

	// Remove: asks, then returns to the queue page; the tenant, its tasks
	// unfinished, is shown removed, and refused.
	code, body = post(t, base+qp+"/tenant/remove", "tenant=acme&from=tenant&csrf="+d.csrfToken())
	require.Equal(t, http.StatusOK, code, body)
	assert.Contains(t, body, `Remove tenant &#34;acme&#34;`)
	assert.False(t, tenant("acme").Removed, "nothing happens before the confirmation")
	assert.Equal(t, qp+"?done=tenant-removed", actOn(t, d, base+qp+"/tenant/remove", "tenant=acme&from=tenant"))
	assert.True(t, tenant("acme").Removed)
	_, err = q.Submit(ctx, nil, queue.WithTenant("acme"))
	assert.ErrorIs(t, err, queue.ErrUnknownTenant)
	code, body = get(t, base+page)
	require.Equal(t, http.StatusOK, code, body)
	assert.Contains(t, body, `<span class="badge warn">removed</span>`)
	assert.NotContains(t, body, `id="remove-tenant"`)
	code, _ = post(t, base+qp+"/tenant/remove", "tenant=nobody&confirm=yes&csrf="+d.csrfToken())
	assert.Equal(t, http.StatusBadRequest, code, "an unknown tenant")
	code, _ = post(t, base+qp+"/tenant/remove", "confirm=yes&csrf="+d.csrfToken())
	assert.Equal(t, http.StatusBadRequest, code, "no tenant")

	// A removed tenant without unfinished tasks has no page.
	require.NoError(t, q.SetTenant(ctx, "idle", 1))
	require.NoError(t, q.RemoveTenant(ctx, "idle"))
	code, _ = get(t, base+qp+"/tenant/idle")
	assert.Equal(t, http.StatusNotFound, code)
}

func TestTenantPageUnderAPrefix(t *testing.T) {
	t.Parallel()
	q := waitingQueue(t, 1, 2)
	d, base := mounted(t)
	page := prefix + "/queue/" + q.Name() + "/tenant/acme"
	code, body := get(t, base+page)
	require.Equal(t, http.StatusOK, code, body)
	assert.Empty(t, outside(body), "every address stays under the prefix")
	resp, body := request(t, http.MethodPost, base+prefix+"/queue/"+q.Name()+"/tenant/pause", "tenant=acme&from=tenant&confirm=yes&csrf="+d.csrfToken())
	require.Equal(t, http.StatusSeeOther, resp.StatusCode, body)
	assert.Equal(t, page+"?done=tenant-paused", resp.Header.Get("Location"))
	_, body = get(t, base+prefix+"/queue/"+q.Name()+"/tasks?state=dead")
	assert.Empty(t, outside(body))
}
