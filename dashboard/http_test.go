package dashboard

import (
	"context"
	"encoding/json"
	"net/http"
	"net/url"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/shepherd-go/shepherd/internal/jsonstyle"
	"github.com/shepherd-go/shepherd/internal/redistest"
	"github.com/shepherd-go/shepherd/pool"
	"github.com/shepherd-go/shepherd/queue"
)

func TestJSONTwinsMatchTheLibrary(t *testing.T) {
	t.Parallel()
	name, n, _ := livePool(t, 2, keysN("j", 6)...)
	q, _, _ := liveQueue(t, "dead-a")
	_, base := serve(t)
	ctx := testCtx(t, 20*time.Second)

	code, body := get(t, base+"/?format=json")
	require.Equal(t, http.StatusOK, code, body)
	var ov Listing
	require.NoError(t, json.Unmarshal([]byte(body), &ov))
	var row *PoolRow
	for i := range ov.Pools {
		if ov.Pools[i].Name == name {
			row = &ov.Pools[i]
		}
	}
	require.NotNil(t, row, "the overview lists the pool")
	assert.Equal(t, 6, row.Jobs)
	assert.Equal(t, 2, row.WorkersHealthy)
	assert.Equal(t, "ok", row.Health)

	// The twins hold the library's answers in the CLI's JSON style.
	pv := twin(t, base+"/pool/"+name+"?format=json")
	st, err := n.Stats(ctx)
	require.NoError(t, err)
	require.Len(t, jsonstyle.At(pv, "stats.workers"), 2)
	for i, w := range st.Workers {
		assert.Equal(t, styled(t, w.Keys), jsonstyle.At(pv, "stats.workers."+strconv.Itoa(i)+".keys"))
	}
	assert.Equal(t, styled(t, st.WorkerTTL), jsonstyle.At(pv, "stats.worker_ttl_ms"))
	assert.NotNil(t, jsonstyle.At(pv, "history"), "the pool's history (empty until its janitor's first sample)")
	assert.EqualValues(t, pool.HistoryStep.Milliseconds(), jsonstyle.At(pv, "step_ms"))

	jv := twin(t, base+"/pool/"+name+"/job/j-03?format=json")
	job, err := n.Job(ctx, "j-03")
	require.NoError(t, err)
	want := styled(t, job).(map[string]any)
	delete(want, "time") // the time of the reading
	for k, w := range want {
		assert.Equal(t, w, jsonstyle.At(jv, "job."+k), k)
	}
	assert.Equal(t, styled(t, []byte("payload of j-03")), jsonstyle.At(jv, "job.payload"))

	qv := twin(t, base+"/queue/"+q.Name()+"?format=json")
	assert.EqualValues(t, 1, jsonstyle.At(qv, "stats.dead"))
	assert.EqualValues(t, 0, jsonstyle.At(qv, "stats.in_flight"))
	dead, err := q.DeadLetters(ctx, 0, 10)
	require.NoError(t, err)
	assert.Equal(t, styled(t, dead), jsonstyle.At(qv, "dead"))
	assert.Equal(t, "dead-a", jsonstyle.At(qv, "dead.0.id"))

	// The processes' handler percentiles, once a keep-alive published them.
	require.Eventually(t, func() bool {
		st, err := q.Stats(ctx)
		return err == nil && len(st.Processes) == 1 && st.Processes[0].Sampled > 0
	}, 10*time.Second, 50*time.Millisecond)
	code, body = get(t, base+"/queue/"+q.Name())
	require.Equal(t, http.StatusOK, code, body)
	assert.Regexp(t, `data-field="took">[0-9.]+[µm]?s / [0-9.]+[µm]?s / [0-9.]+[µm]?s<`, body)

	code, body = get(t, base+"/pool/no-such-pool?format=json")
	assert.Equal(t, http.StatusNotFound, code)
	assert.Contains(t, body, `"error"`)
}

func TestHostileRequests(t *testing.T) {
	t.Parallel()
	evil := `<script>alert("k")</script>/../?x=1#y`
	huge := strings.Repeat("0123456789abcdef", 64<<10) // 1 MiB
	name, n, _ := livePool(t, 1, "plain")
	ctx := testCtx(t, 20*time.Second)
	require.NoError(t, n.DispatchJob(ctx, evil, []byte(`<b onmouseover="x()">bold</b>`)))
	require.NoError(t, n.DispatchJob(ctx, "huge", []byte(huge)))
	_, base := serve(t)
	jobURL := func(k string) string { return base + "/pool/" + url.PathEscape(name) + "/job/" + url.PathEscape(k) }

	t.Run("unknown pool, job, queue, task", func(t *testing.T) {
		for _, path := range []string{"/pool/nope", "/pool/" + name + "/job/nope", "/queue/nope", "/queue/nope/task/x", "/nope"} {
			code, _ := get(t, base+path)
			assert.Equal(t, http.StatusNotFound, code, path)
		}
		code, _ := get(t, base+"/pool/"+url.PathEscape("a}b"))
		assert.Equal(t, http.StatusBadRequest, code, "a name no pool can have")
	})
	t.Run("a key with HTML in it is escaped", func(t *testing.T) {
		code, body := get(t, jobURL(evil))
		require.Equal(t, http.StatusOK, code, body)
		assert.NotContains(t, body, `<script>alert`)
		assert.Contains(t, body, `&lt;script&gt;alert(&#34;k&#34;)&lt;/script&gt;`)
		assert.NotContains(t, body, `<b onmouseover`)
		assert.Contains(t, body, `&lt;b onmouseover=&#34;x()&#34;&gt;bold&lt;/b&gt;`)
		// The pool page links to it with its key escaped in the path.
		_, body = get(t, base+"/pool/"+name)
		assert.Contains(t, body, `/job/`+url.PathEscape(evil))
	})
	t.Run("a huge payload is truncated", func(t *testing.T) {
		code, body := get(t, jobURL("huge"))
		require.Equal(t, http.StatusOK, code)
		assert.Less(t, len(body), 20<<10, "the page stays small")
		assert.Contains(t, body, "Truncated: 1048576 bytes in all")
	})
	t.Run("wrong method", func(t *testing.T) {
		code, _ := get(t, base+"/pool/"+name+"/stop")
		assert.Equal(t, http.StatusMethodNotAllowed, code)
		code, _ = post(t, base+"/pool/"+name, "")
		assert.Equal(t, http.StatusMethodNotAllowed, code)
	})
	t.Run("a POST without the CSRF token", func(t *testing.T) {
		code, body := post(t, base+"/pool/"+name+"/stop", "key=plain&confirm=yes")
		assert.Equal(t, http.StatusForbidden, code, body)
		code, _ = post(t, base+"/pool/"+name+"/stop", "key=plain&confirm=yes&csrf=0000")
		assert.Equal(t, http.StatusForbidden, code)
		_, err := pool.InspectJob(ctx, srv.Client(), name, "plain")
		assert.NoError(t, err, "the job still runs")
	})
	t.Run("a POST from another site", func(t *testing.T) {
		d, base := serve(t)
		code, _ := post(t, base+"/pool/"+name+"/stop", "key=plain&confirm=yes&csrf="+d.csrfToken(), "Sec-Fetch-Site", "cross-site")
		assert.Equal(t, http.StatusForbidden, code)
		_, err := pool.InspectJob(ctx, srv.Client(), name, "plain")
		assert.NoError(t, err, "the job still runs")
	})
	t.Run("another Host", func(t *testing.T) {
		code, _ := get(t, base+"/", "Host", "evil.example:8080")
		assert.Equal(t, http.StatusForbidden, code, "DNS rebinding")
		code, _ = get(t, base+"/", "Host", "localhost:8080")
		assert.Equal(t, http.StatusOK, code)
	})
	t.Run("an action without confirmation asks", func(t *testing.T) {
		d, base := serve(t)
		code, body := post(t, base+"/pool/"+name+"/stop", "key=plain&csrf="+d.csrfToken())
		assert.Equal(t, http.StatusOK, code)
		assert.Contains(t, body, `id="confirm"`)
		_, err := pool.InspectJob(ctx, srv.Client(), name, "plain")
		assert.NoError(t, err, "nothing happened yet")
	})
	t.Run("headers", func(t *testing.T) {
		req, err := http.NewRequest(http.MethodGet, base+"/", nil)
		require.NoError(t, err)
		resp, err := http.DefaultClient.Do(req)
		require.NoError(t, err)
		resp.Body.Close()
		assert.Contains(t, resp.Header.Get("Content-Security-Policy"), "default-src 'self'")
		assert.Equal(t, "DENY", resp.Header.Get("X-Frame-Options"))
	})
}

func TestTokenAndReadOnlyOverHTTP(t *testing.T) {
	t.Parallel()
	name, _, _ := livePool(t, 1, "k1", "k2")
	ctx := testCtx(t, 20*time.Second)

	d, base := serve(t, WithToken("tok-123"))
	csrf := "csrf=" + d.csrfToken()
	code, _ := get(t, base+"/")
	assert.Equal(t, http.StatusUnauthorized, code, "no token")
	code, _ = get(t, base+"/pool/"+name+"?format=json")
	assert.Equal(t, http.StatusUnauthorized, code, "no token, JSON twin")
	code, _ = get(t, base+"/static/style.css")
	assert.Equal(t, http.StatusOK, code, "the static files are not secret: the 401 page is styled")
	code, _ = get(t, base+"/", "Authorization", "Bearer wrong")
	assert.Equal(t, http.StatusUnauthorized, code, "wrong token")
	code, _ = get(t, base+"/", "Authorization", "Bearer tok-123")
	assert.Equal(t, http.StatusOK, code, "bearer token")
	code, _ = get(t, base+"/", "Cookie", tokenCookie+"=tok-123")
	assert.Equal(t, http.StatusOK, code, "cookie")
	code, body := get(t, base+"/pool/"+name+"/job/"+url.PathEscape("a?b/c")+"?token=tok-123&x=1")
	assert.Equal(t, http.StatusSeeOther, code, "the token moves to a cookie")
	assert.Contains(t, body, `/job/a%3Fb%2Fc?x=1"`, "the redirect keeps the escaped path and the rest of the query")
	assert.NotContains(t, body, "tok-123")
	code, _ = get(t, base+"/?token=wrong")
	assert.Equal(t, http.StatusUnauthorized, code, "wrong token in the URL")
	code, _ = post(t, base+"/pool/"+name+"/stop", "key=k1&confirm=yes&"+csrf)
	assert.Equal(t, http.StatusUnauthorized, code, "an action without the token")
	code, _ = post(t, base+"/pool/"+name+"/stop", "key=k1&confirm=yes&"+csrf, "Authorization", "Bearer tok-123")
	assert.Equal(t, http.StatusSeeOther, code, "an action with it")
	_, err := pool.InspectJob(ctx, srv.Client(), name, "k1")
	assert.ErrorIs(t, err, pool.ErrJobNotFound)

	d, base = serve(t, WithReadOnly(true))
	code, _ = post(t, base+"/pool/"+name+"/stop", "key=k2&confirm=yes&csrf="+d.csrfToken())
	assert.Equal(t, http.StatusForbidden, code, "read-only")
	code, _ = post(t, base+"/pool/"+name+"/shutdown", "confirm=yes&csrf="+d.csrfToken())
	assert.Equal(t, http.StatusForbidden, code, "read-only")
	_, err = pool.InspectJob(ctx, srv.Client(), name, "k2")
	assert.NoError(t, err, "the job still runs")
	code, body = get(t, base+"/pool/"+name+"/job/k2")
	assert.Equal(t, http.StatusOK, code)
	assert.NotContains(t, body, `method="post"`, "no form is offered")
}

func TestPreviewIsBoundedAndSafe(t *testing.T) {
	t.Parallel()
	p := preview([]byte("héllo"))
	assert.Equal(t, "héllo", p.Text)
	assert.False(t, p.Truncated || p.Hex)

	long := []byte(strings.Repeat("é", previewBytes)) // 2 bytes a rune: cut mid-rune
	p = preview(long)
	assert.True(t, p.Truncated)
	assert.False(t, p.Hex, "text cut inside a rune is still text")
	assert.LessOrEqual(t, len(p.Text), previewBytes)

	bin := []byte{0xff, 0x00, 0xfe, 'a'}
	p = preview(bin)
	assert.True(t, p.Hex)
	assert.Equal(t, "0000  ff 00 fe 61\n", p.Text)
}

// kaboom is a handler's bug, named so that its frame is found in the
// stack.
func kaboom() { panic("kaboom") }

// The task page shows a panic's error as one line, and its stack apart.
func TestTaskPageShowsAPanicsStackApart(t *testing.T) {
	t.Parallel()
	ctx := testCtx(t, 20*time.Second)
	q, err := queue.Open(ctx, srv.Client(), redistest.Name(t))
	require.NoError(t, err)
	t.Cleanup(func() { _ = q.Close(context.Background()) })
	_, err = q.Serve(func(context.Context, *queue.Task) ([]byte, error) {
		kaboom()
		return nil, nil
	}, queue.WithWorkers(1))
	require.NoError(t, err)
	f, err := q.Submit(ctx, nil, queue.WithTaskID("bug"), queue.WithMaxAttempts(1))
	require.NoError(t, err)
	_, err = f.Wait(ctx)
	require.ErrorIs(t, err, queue.ErrFailed)
	_, base := serve(t)

	code, body := get(t, base+"/queue/"+q.Name()+"/task/bug")
	require.Equal(t, http.StatusOK, code, body)
	assert.Contains(t, body, `<td class="error-text">panic: kaboom</td>`, "the error is one line")
	assert.Regexp(t, `(?s)<pre class="stack">goroutine [^<]*dashboard\.kaboom\(`, body, "the stack is shown apart")
	code, body = get(t, base+"/queue/"+q.Name())
	require.Equal(t, http.StatusOK, code, body)
	assert.Contains(t, body, `<td class="error-text">panic: kaboom</td>`, "the dead letters' list shows the one line")
}

// The 401 page is styled (its stylesheet and script need no token, being
// no secret), and it says how to pass the token; the pages, their JSON
// twins and the actions still need it.
func TestUnauthorizedPageIsStyledAndSaysHow(t *testing.T) {
	t.Parallel()
	_, base := serve(t, WithToken("tok-123"))
	resp, body := request(t, http.MethodGet, base+"/", "")
	require.Equal(t, http.StatusUnauthorized, resp.StatusCode)
	assert.Contains(t, body, `<link rel="stylesheet" href="/static/style.css">`)
	assert.Contains(t, body, "?token=")
	assert.Contains(t, body, "Authorization: Bearer")
	assert.NotContains(t, body, "tok-123")
	for _, f := range []string{"style.css", "app.js"} {
		resp, css := request(t, http.MethodGet, base+"/static/"+f, "")
		assert.Equal(t, http.StatusOK, resp.StatusCode, f)
		assert.NotEmpty(t, css, f)
	}
	for _, path := range []string{"/static/../", "/static/%2e%2e/", "/static/nope.css", "/static/"} {
		code, body := get(t, base+path)
		assert.NotEqual(t, http.StatusOK, code, "%s: %s", path, body)
	}
}

// Every time a page shows is in UTC, in one format: to the millisecond,
// as a task's times must be (its attempts may be milliseconds apart), or
// to the second for the charts' range and the live clock.
func TestPagesShowTimesInUTC(t *testing.T) {
	t.Parallel()
	q, _, _ := liveQueue(t, "dead-t")
	ctx := testCtx(t, 20*time.Second)
	f, err := q.Submit(ctx, []byte("ok"), queue.WithTaskID("done-t"))
	require.NoError(t, err)
	_, err = f.Wait(ctx)
	require.NoError(t, err)
	name, _, _ := livePool(t, 1, "k1")
	_, base := serve(t)
	stamp := regexp.MustCompile(`\d{4}-\d\d-\d\d[ T][\d:.]+(?:Z| [A-Za-z]+)?`)
	for _, path := range []string{"/", "/pool/" + name, "/pool/" + name + "/job/k1", "/queue/" + q.Name(), "/queue/" + q.Name() + "/task/done-t", "/queue/" + q.Name() + "/task/dead-t"} {
		code, body := get(t, base+path)
		require.Equal(t, http.StatusOK, code, body)
		found := stamp.FindAllString(body, -1)
		assert.NotEmpty(t, found, path)
		millis := 0
		for _, s := range found {
			assert.Regexp(t, `^\d{4}-\d\d-\d\d \d\d:\d\d:\d\d(\.\d{3})? UTC$`, s, "%s shows a time as %q", path, s)
			if strings.Contains(s, ".") {
				millis++
			}
		}
		if strings.Contains(path, "/task/") {
			assert.Positive(t, millis, "%s shows a task's times to the second: %q", path, found)
		}
		assert.NotRegexp(t, `\b[AP]M\b`, body, path)
	}
}

// A finished task's payload is not kept: its page says so instead of
// showing an empty payload of 0 bytes. A dead letter keeps its payload.
func TestTaskPageSaysAFinishedPayloadIsNotKept(t *testing.T) {
	t.Parallel()
	q, _, _ := liveQueue(t, "dead-p")
	ctx := testCtx(t, 20*time.Second)
	f, err := q.Submit(ctx, []byte("ok"), queue.WithTaskID("done-p"))
	require.NoError(t, err)
	_, err = f.Wait(ctx)
	require.NoError(t, err)
	_, base := serve(t)

	code, body := get(t, base+"/queue/"+q.Name()+"/task/done-p")
	require.Equal(t, http.StatusOK, code, body)
	assert.Contains(t, body, `id="payload-gone"`)
	assert.Contains(t, body, "Not kept")
	assert.NotContains(t, body, "0 bytes")
	assert.NotContains(t, body, `<pre id="payload">`)
	assert.Contains(t, body, "Result, 4 bytes", "the result is kept")

	code, body = get(t, base+"/queue/"+q.Name()+"/task/dead-p")
	require.Equal(t, http.StatusOK, code, body)
	assert.Contains(t, body, `<pre id="payload">fail</pre>`, "a dead letter keeps its payload")
	assert.NotContains(t, body, `id="payload-gone"`)
}
