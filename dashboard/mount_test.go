package dashboard

import (
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/shepherd-go/shepherd/pool"
	"github.com/shepherd-go/shepherd/queue"
)

// prefix is where the mounting tests mount the dashboard.
const prefix = "/ops/shepherd"

// mounted serves a dashboard of the test Redis as a user would: under
// prefix in the user's own mux, next to a route of the user's
// (GET /healthz, answering "ok").
func mounted(t *testing.T, opts ...Option) (*Handler, string) {
	t.Helper()
	d, err := New(srv.Client(), append([]Option{WithPrefix(prefix)}, opts...)...)
	require.NoError(t, err)
	mux := http.NewServeMux()
	mux.Handle(prefix+"/", d)
	mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, r *http.Request) { _, _ = io.WriteString(w, "ok") })
	hs := httptest.NewServer(mux)
	t.Cleanup(func() {
		hs.Close()
		d.Close()
	})
	return d, hs.URL
}

// addresses finds the addresses of a page's links, forms, stylesheets
// and scripts.
var addresses = regexp.MustCompile(`(?:href|action|src)="([^"]*)"`)

// outside returns the addresses of an HTML page that are not under the
// prefix.
func outside(html string) []string {
	var out []string
	for _, m := range addresses.FindAllStringSubmatch(html, -1) {
		if !strings.HasPrefix(m[1], prefix+"/") {
			out = append(out, m[1])
		}
	}
	return out
}

func TestMountedUnderAPrefix(t *testing.T) {
	t.Parallel()
	name, _, h := livePool(t, 2, "alpha", "beta", "a/b?c")
	q, _, _ := liveQueue(t, "dead-1", "dead-2")
	d, base := mounted(t)
	ctx := testCtx(t, 30*time.Second)
	root := base + prefix
	poolPath := prefix + "/pool/" + url.PathEscape(name)
	queuePath := prefix + "/queue/" + url.PathEscape(q.Name())
	csrf := "csrf=" + d.csrfToken()

	t.Run("pages, JSON twins and static files", func(t *testing.T) {
		code, body := get(t, root+"/")
		require.Equal(t, http.StatusOK, code, body)
		assert.Contains(t, body, `href="`+prefix+`/static/style.css"`)
		assert.Contains(t, body, `src="`+prefix+`/static/app.js"`)
		code, body = get(t, base+poolPath+"?format=json")
		require.Equal(t, http.StatusOK, code, body)
		assert.Contains(t, body, `"jobs": 3`)
		resp, _ := request(t, http.MethodGet, root+"/static/style.css", "")
		assert.Equal(t, http.StatusOK, resp.StatusCode)
		assert.Contains(t, resp.Header.Get("Content-Type"), "text/css")
		resp, _ = request(t, http.MethodGet, root+"/static/app.js", "")
		assert.Equal(t, http.StatusOK, resp.StatusCode)
		// The prefix without its slash goes to the overview: sent there by
		// the user's mux, or by the handler when it gets it.
		resp, _ = request(t, http.MethodGet, root, "")
		assert.Contains(t, []int{http.StatusMovedPermanently, http.StatusTemporaryRedirect}, resp.StatusCode, "a redirect (its code depends on the Go version)")
		assert.Equal(t, prefix+"/", resp.Header.Get("Location"))
		rec := httptest.NewRecorder()
		d.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "http://localhost"+prefix, nil))
		assert.Equal(t, http.StatusMovedPermanently, rec.Code)
		assert.Equal(t, prefix+"/", rec.Header().Get("Location"))
		// The user's route still answers; the dashboard's paths without the
		// prefix are not the dashboard's.
		code, body = get(t, base+"/healthz")
		assert.Equal(t, http.StatusOK, code)
		assert.Equal(t, "ok", body)
		for _, path := range []string{"/", "/static/style.css", "/pool/" + url.PathEscape(name)} {
			code, body = get(t, base+path)
			assert.Equal(t, http.StatusNotFound, code, path)
			assert.NotContains(t, body, "shepherd", path)
		}
	})

	t.Run("every address on every page stays under the prefix", func(t *testing.T) {
		for _, path := range []string{
			prefix + "/",
			poolPath,
			poolPath + "/job/alpha",
			poolPath + "/job/" + url.PathEscape("a/b?c"),
			queuePath,
			queuePath + "/task/dead-1",
			poolPath + "/job/no-such-job", // the error page
			prefix + "/queue/no-such-queue",
		} {
			_, body := get(t, base+path)
			assert.NotEmpty(t, addresses.FindAllString(body, -1), path)
			assert.Empty(t, outside(body), "%s points outside the prefix", path)
		}
		// The confirmation asked before an action: its form posts to the
		// action again, its Cancel goes back to the pool's page.
		code, body := post(t, base+poolPath+"/stop", "key=alpha&"+csrf)
		require.Equal(t, http.StatusOK, code, body)
		assert.Contains(t, body, `action="`+poolPath+`/stop"`)
		assert.Contains(t, body, `href="`+poolPath+`" class="cancel"`)
		assert.Empty(t, outside(body))
	})

	t.Run("redirects stay under the prefix", func(t *testing.T) {
		resp, _ := request(t, http.MethodGet, base+poolPath+"/find?key="+url.QueryEscape("a/b?c"), "")
		assert.Equal(t, http.StatusSeeOther, resp.StatusCode)
		assert.Equal(t, poolPath+"/job/a%2Fb%3Fc", resp.Header.Get("Location"))

		resp, body := request(t, http.MethodPost, base+poolPath+"/stop", "key=alpha&confirm=yes&"+csrf)
		require.Equal(t, http.StatusSeeOther, resp.StatusCode, body)
		assert.Equal(t, poolPath+"?done=stopped", resp.Header.Get("Location"))
		_, err := pool.InspectJob(ctx, srv.Client(), name, "alpha")
		assert.ErrorIs(t, err, pool.ErrJobNotFound)
		assert.True(t, h.wasStopped("alpha"))

		resp, body = request(t, http.MethodPost, base+queuePath+"/delete", "id=dead-2&confirm=yes&"+csrf)
		require.Equal(t, http.StatusSeeOther, resp.StatusCode, body)
		assert.Equal(t, queuePath+"?done=deleted", resp.Header.Get("Location"))
		_, err = q.Inspect(ctx, "dead-2")
		assert.ErrorIs(t, err, queue.ErrTaskNotFound)

		other, _, _ := livePool(t, 1, "x")
		resp, body = request(t, http.MethodPost, base+prefix+"/pool/"+other+"/shutdown", "confirm=yes&"+csrf)
		require.Equal(t, http.StatusSeeOther, resp.StatusCode, body)
		assert.Equal(t, prefix+"/?done=shutdown", resp.Header.Get("Location"))
	})
}

func TestMountedGuardsHold(t *testing.T) {
	t.Parallel()
	name, _, _ := livePool(t, 1, "k1", "k2")
	ctx := testCtx(t, 30*time.Second)
	poolPath := prefix + "/pool/" + url.PathEscape(name)
	stillRuns := func(key string) {
		t.Helper()
		_, err := pool.InspectJob(ctx, srv.Client(), name, key)
		assert.NoError(t, err, "job %s still runs", key)
	}

	t.Run("token", func(t *testing.T) {
		d, base := mounted(t, WithToken("tok-123"))
		code, _ := get(t, base+prefix+"/")
		assert.Equal(t, http.StatusUnauthorized, code, "no token")
		code, _ = get(t, base+prefix+"/static/style.css")
		assert.Equal(t, http.StatusOK, code, "no token, static file: not secret")
		code, _ = get(t, base+"/healthz")
		assert.Equal(t, http.StatusOK, code, "the user's own route needs no token")
		code, _ = get(t, base+poolPath+"?format=json", "Authorization", "Bearer tok-123")
		assert.Equal(t, http.StatusOK, code, "bearer token, JSON twin")

		resp, body := request(t, http.MethodGet, base+poolPath+"/job/k1?token=tok-123&x=1", "")
		assert.Equal(t, http.StatusSeeOther, resp.StatusCode, "the token moves to a cookie")
		assert.Equal(t, poolPath+"/job/k1?x=1", resp.Header.Get("Location"), "and leaves the address, which stays under the prefix")
		assert.NotContains(t, body, "tok-123")
		cookies := resp.Cookies()
		require.Len(t, cookies, 1)
		c := cookies[0]
		assert.Equal(t, tokenCookie, c.Name)
		assert.Equal(t, prefix+"/", c.Path, "the cookie is scoped to the dashboard")
		assert.True(t, c.HttpOnly)
		assert.Equal(t, http.SameSiteStrictMode, c.SameSite)
		code, _ = get(t, base+poolPath+"/job/k1?x=1", "Cookie", c.Name+"="+c.Value)
		assert.Equal(t, http.StatusOK, code, "the cookie")
		code, _ = get(t, base+prefix+"/", "Cookie", c.Name+"=other; "+c.Name+"="+c.Value)
		assert.Equal(t, http.StatusOK, code, "the cookie next to another dashboard's")

		code, _ = post(t, base+poolPath+"/stop", "key=k1&confirm=yes&csrf="+d.csrfToken())
		assert.Equal(t, http.StatusUnauthorized, code, "an action without the token")
		stillRuns("k1")
	})

	t.Run("CSRF and other sites", func(t *testing.T) {
		d, base := mounted(t)
		code, _ := post(t, base+poolPath+"/stop", "key=k1&confirm=yes")
		assert.Equal(t, http.StatusForbidden, code, "no CSRF token")
		code, _ = post(t, base+poolPath+"/stop", "key=k1&confirm=yes&csrf=0000")
		assert.Equal(t, http.StatusForbidden, code, "a wrong CSRF token")
		other, _ := mounted(t)
		code, _ = post(t, base+poolPath+"/stop", "key=k1&confirm=yes&csrf="+other.csrfToken())
		assert.Equal(t, http.StatusForbidden, code, "another dashboard's CSRF token")
		for _, site := range []string{"cross-site", "same-site"} {
			code, _ = post(t, base+poolPath+"/stop", "key=k1&confirm=yes&csrf="+d.csrfToken(), "Sec-Fetch-Site", site)
			assert.Equal(t, http.StatusForbidden, code, "a POST from %s", site)
		}
		stillRuns("k1")
		resp, body := request(t, http.MethodPost, base+poolPath+"/stop", "key=k1&confirm=yes&csrf="+d.csrfToken(), "Sec-Fetch-Site", "same-origin")
		assert.Equal(t, http.StatusSeeOther, resp.StatusCode, body)
		_, err := pool.InspectJob(ctx, srv.Client(), name, "k1")
		assert.ErrorIs(t, err, pool.ErrJobNotFound, "the same origin may act")
	})

	t.Run("Host", func(t *testing.T) {
		_, base := mounted(t)
		code, body := get(t, base+prefix+"/", "Host", "evil.example:8080")
		assert.Equal(t, http.StatusForbidden, code, "DNS rebinding")
		assert.Contains(t, body, "WithAllowedHosts")
		code, _ = get(t, base+"/healthz", "Host", "evil.example:8080")
		assert.Equal(t, http.StatusOK, code, "the guard is the dashboard's, not the user's server's")
		for _, host := range []string{"localhost:8080", "127.0.0.1", "[::1]:80"} {
			code, _ = get(t, base+prefix+"/", "Host", host)
			assert.Equal(t, http.StatusOK, code, host)
		}

		_, base = mounted(t, WithAllowedHosts("ops.example.com:443", "Admin.Example.com"))
		for host, want := range map[string]int{
			"ops.example.com":      http.StatusOK,
			"ops.example.com:8443": http.StatusOK,
			"admin.example.com":    http.StatusOK,
			"localhost":            http.StatusOK,
			"evil.example":         http.StatusForbidden,
			"example.com":          http.StatusForbidden,
		} {
			code, _ = get(t, base+prefix+"/", "Host", host)
			assert.Equal(t, want, code, host)
		}

		_, base = mounted(t, WithAnyHost(true))
		code, _ = get(t, base+prefix+"/", "Host", "evil.example")
		assert.Equal(t, http.StatusOK, code, "WithAnyHost")
	})

	t.Run("read-only", func(t *testing.T) {
		d, base := mounted(t, WithReadOnly(true))
		code, _ := post(t, base+poolPath+"/stop", "key=k2&confirm=yes&csrf="+d.csrfToken())
		assert.Equal(t, http.StatusForbidden, code)
		code, _ = post(t, base+poolPath+"/shutdown", "confirm=yes&csrf="+d.csrfToken())
		assert.Equal(t, http.StatusForbidden, code)
		stillRuns("k2")
		code, body := get(t, base+poolPath+"/job/k2")
		assert.Equal(t, http.StatusOK, code)
		assert.NotContains(t, body, `method="post"`, "no form is offered")
	})

	t.Run("wrong method and unknown paths under the prefix", func(t *testing.T) {
		_, base := mounted(t)
		code, _ := get(t, base+poolPath+"/stop")
		assert.Equal(t, http.StatusMethodNotAllowed, code)
		code, _ = get(t, base+prefix+"/nope")
		assert.Equal(t, http.StatusNotFound, code)
	})

	t.Run("mounted through http.StripPrefix by mistake", func(t *testing.T) {
		d, err := New(srv.Client(), WithPrefix(prefix))
		require.NoError(t, err)
		t.Cleanup(d.Close)
		mux := http.NewServeMux()
		mux.Handle(prefix+"/", http.StripPrefix(prefix, d))
		hs := httptest.NewServer(mux)
		t.Cleanup(hs.Close)
		code, body := get(t, hs.URL+prefix+"/")
		assert.Equal(t, http.StatusNotFound, code)
		assert.Contains(t, body, "without http.StripPrefix", "the answer says what is wrong")
	})
}
