package dashboard

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/shepherd-go/shepherd/internal/redistest"
	"github.com/shepherd-go/shepherd/pool"
	"github.com/shepherd-go/shepherd/queue"
)

// hostileID is a task id or job key that would run if a page did not
// escape it.
const hostileID = "<script>alert(1)</script>"

// waitingQueue opens a queue nobody serves and submits waiting tasks:
// plain ones p-00 to p-(plain-1), then the hostile id, then acme's
// a-00 to a-(acme-1); and one delayed task, later-1.
func waitingQueue(t *testing.T, plain, acme int) *queue.Queue {
	t.Helper()
	ctx := testCtx(t, 30*time.Second)
	q, err := queue.Open(ctx, srv.Client(), redistest.Name(t))
	require.NoError(t, err)
	t.Cleanup(func() { _ = q.Close(ctx) })
	require.NoError(t, q.SetTenant(ctx, "acme", 1))
	submit := func(id string, opts ...queue.SubmitOption) {
		_, err := q.Submit(ctx, []byte("x"), append(opts, queue.WithTaskID(id))...)
		require.NoError(t, err)
	}
	for i := range plain {
		submit(fmt.Sprintf("p-%02d", i))
	}
	submit(hostileID)
	for i := range acme {
		submit(fmt.Sprintf("a-%02d", i), queue.WithTenant("acme"))
	}
	submit("later-1", queue.WithDelay(time.Hour))
	return q
}

// taskIDs are the ids of a task list page's rows, in order.
func taskIDs(t *testing.T, html string) []string {
	t.Helper()
	var ids []string
	for _, m := range regexp.MustCompile(`<tr data-task="([^"]*)"`).FindAllStringSubmatch(html, -1) {
		ids = append(ids, m[1])
	}
	return ids
}

// pagerLinks returns a page's previous and next links, unescaped ("" when
// absent).
func pagerLinks(html string) (prev, next string) {
	find := func(id string) string {
		m := regexp.MustCompile(`<a href="([^"]*)" id="` + id + `"`).FindStringSubmatch(html)
		if m == nil {
			return ""
		}
		return strings.ReplaceAll(m[1], "&amp;", "&")
	}
	return find("prev"), find("next")
}

func TestTaskListsPageFilterAndSearch(t *testing.T) {
	t.Parallel()
	q := waitingQueue(t, 55, 52)
	_, base := serve(t)
	list := base + "/queue/" + q.Name() + "/tasks"

	// Page 1: the 50 oldest untenanted tasks, a next page, no previous.
	code, body := get(t, list+"?state=waiting")
	require.Equal(t, http.StatusOK, code, body)
	ids := taskIDs(t, body)
	require.Len(t, ids, 50)
	assert.Equal(t, "p-00", ids[0])
	assert.Equal(t, "p-49", ids[49])
	prev, next := pagerLinks(body)
	assert.Empty(t, prev)
	require.Equal(t, "/queue/"+q.Name()+"/tasks?page=2&state=waiting", next)
	assert.Contains(t, body, `<a href="/queue/`+q.Name()+`/task/p-00">p-00</a>`, "a row links to its task")

	// Page 2: the rest of the untenanted ones, the hostile id escaped,
	// then acme's first.
	code, body = get(t, base+next)
	require.Equal(t, http.StatusOK, code, body)
	ids = taskIDs(t, body)
	require.Len(t, ids, 50)
	assert.Equal(t, []string{"p-50", "p-51", "p-52", "p-53", "p-54", "&lt;script&gt;alert(1)&lt;/script&gt;", "a-00"}, ids[:7])
	assert.NotContains(t, body, hostileID)
	assert.Contains(t, body, `/task/`+url.PathEscape(hostileID)+`"`)
	prev, next = pagerLinks(body)
	assert.Equal(t, "/queue/"+q.Name()+"/tasks?state=waiting", prev)
	require.NotEmpty(t, next)

	// Page 3: the last 8, no next; page 4 is empty, with a way back.
	_, body = get(t, base+next)
	assert.Len(t, taskIDs(t, body), 8)
	_, next = pagerLinks(body)
	assert.Empty(t, next)
	code, body = get(t, list+"?state=waiting&page=4")
	require.Equal(t, http.StatusOK, code)
	assert.Empty(t, taskIDs(t, body))
	assert.Contains(t, body, `id="tasks-none"`)
	prev, _ = pagerLinks(body)
	assert.Contains(t, prev, "page=3")

	// The tenant filter: acme's tasks alone, its links keep it.
	_, body = get(t, list+"?state=waiting&tenant=acme")
	ids = taskIDs(t, body)
	require.Len(t, ids, 50)
	assert.Equal(t, "a-00", ids[0])
	_, next = pagerLinks(body)
	require.Equal(t, "/queue/"+q.Name()+"/tasks?page=2&state=waiting&tenant=acme", next)
	_, body = get(t, base+next)
	assert.Equal(t, []string{"a-50", "a-51"}, taskIDs(t, body))
	_, body = get(t, list+"?state=waiting&tenant=nobody")
	assert.Empty(t, taskIDs(t, body))

	// Other states.
	_, body = get(t, list+"?state=delayed")
	assert.Equal(t, []string{"later-1"}, taskIDs(t, body))
	for _, st := range []string{"retry", "active", "dead"} {
		code, body = get(t, list+"?state="+st)
		assert.Equal(t, http.StatusOK, code, st)
		assert.Empty(t, taskIDs(t, body), st)
	}

	// Search: found, to the task's page; not found, said with 404.
	resp, _ := request(t, http.MethodGet, list+"?state=waiting&id="+url.QueryEscape(hostileID), "")
	assert.Equal(t, http.StatusSeeOther, resp.StatusCode)
	assert.Equal(t, "/queue/"+q.Name()+"/task/"+url.PathEscape(hostileID), resp.Header.Get("Location"))
	code, body = get(t, list+"?state=waiting&id="+url.QueryEscape("<b>nope</b>"))
	assert.Equal(t, http.StatusNotFound, code)
	assert.Contains(t, body, `id="not-found"`)
	assert.Contains(t, body, "&lt;b&gt;nope&lt;/b&gt;")
	assert.NotContains(t, body, "<b>nope")

	// Bad requests.
	for _, qs := range []string{"state=finished", "state=%3Cx%3E", "state=waiting&page=0", "state=waiting&page=x"} {
		code, body = get(t, list+"?"+qs)
		assert.Equal(t, http.StatusBadRequest, code, qs)
		assert.NotContains(t, body, "<x>")
	}
	code, _ = get(t, base+"/queue/no-such-queue-"+q.Name()+"/tasks")
	assert.Equal(t, http.StatusNotFound, code)

	// The JSON twin.
	code, body = get(t, list+"?state=waiting&tenant=acme&page=2&format=json")
	require.Equal(t, http.StatusOK, code, body)
	var v struct {
		Queue, State, Tenant string
		Page                 int
		PageSize             int `json:"page_size"`
		More                 bool
		Tasks                []queue.TaskInfo
	}
	require.NoError(t, json.Unmarshal([]byte(body), &v))
	assert.Equal(t, q.Name(), v.Queue)
	assert.Equal(t, "waiting", v.State)
	assert.Equal(t, "acme", v.Tenant)
	assert.Equal(t, 2, v.Page)
	assert.Equal(t, 50, v.PageSize)
	assert.False(t, v.More)
	require.Len(t, v.Tasks, 2)
	assert.Equal(t, "a-50", v.Tasks[0].ID)
	code, body = get(t, list+"?state=waiting&id=nope&format=json")
	assert.Equal(t, http.StatusNotFound, code)
	assert.Contains(t, body, `"not_found"`)
}

func TestQueuePageLinksItsLists(t *testing.T) {
	t.Parallel()
	q := waitingQueue(t, 1, 0)
	_, base := serve(t)
	_, body := get(t, base+"/queue/"+q.Name())
	for _, st := range []string{"waiting", "delayed", "retry", "active", "dead"} {
		assert.Contains(t, body, `href="/queue/`+q.Name()+`/tasks?state=`+st+`" id="list-`+st+`"`)
	}
}

func TestTaskListsUnderAPrefix(t *testing.T) {
	t.Parallel()
	q := waitingQueue(t, 51, 0)
	_, base := mounted(t)
	code, body := get(t, base+prefix+"/queue/"+q.Name()+"/tasks?state=waiting")
	require.Equal(t, http.StatusOK, code, body)
	assert.Empty(t, outside(body), "every address stays under the prefix")
	_, next := pagerLinks(body)
	assert.Equal(t, prefix+"/queue/"+q.Name()+"/tasks?page=2&state=waiting", next)
	resp, _ := request(t, http.MethodGet, base+prefix+"/queue/"+q.Name()+"/tasks?id=p-03", "")
	assert.Equal(t, http.StatusSeeOther, resp.StatusCode)
	assert.Equal(t, prefix+"/queue/"+q.Name()+"/task/p-03", resp.Header.Get("Location"))
	_, body = get(t, base+prefix+"/queue/"+q.Name())
	assert.Empty(t, outside(body))
}

// jobKeys are the keys of a job list page's rows, in order, as the HTML
// has them.
func jobKeys(html string) []string {
	var keys []string
	for _, m := range regexp.MustCompile(`<tr data-job="([^"]*)"`).FindAllStringSubmatch(html, -1) {
		keys = append(keys, m[1])
	}
	return keys
}

func TestJobListPagesFiltersAndSearches(t *testing.T) {
	t.Parallel()
	name, n, _ := livePool(t, 2, append(keysN("j", 110), hostileID)...)
	ctx := testCtx(t, 20*time.Second)
	_, base := serve(t)
	list := base + "/pool/" + name + "/jobs"
	all, err := n.JobKeys(ctx)
	require.NoError(t, err)
	require.Len(t, all, 111)
	escaped := func(keys []string) []string {
		out := make([]string, len(keys))
		for i, k := range keys {
			out[i] = strings.NewReplacer("<", "&lt;", ">", "&gt;").Replace(k)
		}
		return out
	}

	code, body := get(t, list)
	require.Equal(t, http.StatusOK, code, body)
	assert.Equal(t, escaped(all[:50]), jobKeys(body))
	assert.NotContains(t, body, hostileID)
	assert.Contains(t, body, `href="/pool/`+name+`/job/`+url.PathEscape(hostileID)+`"`)
	prev, next := pagerLinks(body)
	assert.Empty(t, prev)
	require.Equal(t, "/pool/"+name+"/jobs?page=2", next)
	_, body = get(t, base+next)
	assert.Equal(t, escaped(all[50:100]), jobKeys(body))
	_, next = pagerLinks(body)
	_, body = get(t, base+next)
	assert.Equal(t, escaped(all[100:]), jobKeys(body))
	prev, next = pagerLinks(body)
	assert.Equal(t, "/pool/"+name+"/jobs?page=2", prev)
	assert.Empty(t, next)
	_, body = get(t, list+"?page=9")
	assert.Contains(t, body, `id="jobs-none"`)

	// A worker's jobs, its filter kept by the pager.
	st, err := n.Stats(ctx)
	require.NoError(t, err)
	w := st.Workers[0]
	for _, ws := range st.Workers {
		if len(ws.Keys) > len(w.Keys) {
			w = ws
		}
	}
	require.Greater(t, len(w.Keys), 50, "one of the two workers has over 50 of the 111 jobs")
	_, body = get(t, list+"?worker="+url.QueryEscape(w.ID))
	assert.Equal(t, escaped(w.Keys[:50]), jobKeys(body))
	_, next = pagerLinks(body)
	require.Equal(t, "/pool/"+name+"/jobs?page=2&worker="+url.QueryEscape(w.ID), next)
	_, body = get(t, base+next)
	assert.Equal(t, escaped(w.Keys[50:]), jobKeys(body))
	_, body = get(t, list+"?worker=nobody")
	assert.Empty(t, jobKeys(body))

	// Search by key: a start lists, a whole key alone redirects.
	_, body = get(t, list+"?q=j-10")
	assert.Equal(t, []string{"j-10", "j-100", "j-101", "j-102", "j-103", "j-104", "j-105", "j-106", "j-107", "j-108", "j-109"}, jobKeys(body))
	for key, to := range map[string]string{"j-100": "j-100", hostileID: url.PathEscape(hostileID)} {
		resp, _ := request(t, http.MethodGet, list+"?q="+url.QueryEscape(key), "")
		assert.Equal(t, http.StatusSeeOther, resp.StatusCode, key)
		assert.Equal(t, "/pool/"+name+"/job/"+to, resp.Header.Get("Location"))
	}
	code, body = get(t, list+"?q="+url.QueryEscape("<b>zz"))
	assert.Equal(t, http.StatusOK, code)
	assert.Contains(t, body, `id="jobs-none"`)
	assert.NotContains(t, body, "<b>zz")

	// Bad requests, and the JSON twin.
	code, _ = get(t, list+"?page=0")
	assert.Equal(t, http.StatusBadRequest, code)
	code, _ = get(t, base+"/pool/no-such-pool-"+name+"/jobs")
	assert.Equal(t, http.StatusNotFound, code)
	code, body = get(t, list+"?q=j-10&format=json")
	require.Equal(t, http.StatusOK, code, body)
	var v struct {
		Pool  string
		Q     string
		Total int
		More  bool
		Jobs  []pool.JobInfo
	}
	require.NoError(t, json.Unmarshal([]byte(body), &v))
	assert.Equal(t, name, v.Pool)
	assert.Equal(t, "j-10", v.Q)
	assert.Equal(t, 11, v.Total)
	assert.False(t, v.More)
	require.Len(t, v.Jobs, 11)
	assert.Equal(t, "j-10", v.Jobs[0].Key)
	assert.NotEmpty(t, v.Jobs[0].State)
	assert.Empty(t, v.Jobs[0].Payload, "the list leaves payloads to the job's page")

	// The pool page links the list, and a worker's "and N more" its jobs.
	_, body = get(t, base+"/pool/"+name)
	assert.Contains(t, body, `href="/pool/`+name+`/jobs" id="list-jobs"`)
	assert.Contains(t, body, `<a href="/pool/`+name+`/jobs?worker=`+url.QueryEscape(w.ID)+`" class="more">and `)
}

func TestJobListUnderAPrefix(t *testing.T) {
	t.Parallel()
	name, _, _ := livePool(t, 1, keysN("k", 52)...)
	_, base := mounted(t)
	code, body := get(t, base+prefix+"/pool/"+name+"/jobs")
	require.Equal(t, http.StatusOK, code, body)
	assert.Empty(t, outside(body), "every address stays under the prefix")
	_, next := pagerLinks(body)
	assert.Equal(t, prefix+"/pool/"+name+"/jobs?page=2", next)
	resp, _ := request(t, http.MethodGet, base+prefix+"/pool/"+name+"/jobs?q=k-51", "")
	assert.Equal(t, http.StatusSeeOther, resp.StatusCode)
	assert.Equal(t, prefix+"/pool/"+name+"/job/k-51", resp.Header.Get("Location"))
	_, body = get(t, base+prefix+"/pool/"+name)
	assert.Empty(t, outside(body))
}
