package dashboard

import (
	"crypto/hmac"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/hex"
	"net"
	"net/http"
	"net/url"
	"path"
	"strconv"
	"strings"
)

// tokenCookie holds the token of a browser that opened a page with
// ?token=.
const tokenCookie = "shepherd_token"

// guard wraps the pages with the checks every request passes, in order:
// the Host header, the prefix, the token, the route (404, or 405 for a
// wrong method), and for a POST the read-only switch, the request's site
// and the CSRF token. Every answer
// gets headers that keep the pages from being framed, sniffed or fed
// code from elsewhere.
func (s *Handler) guard(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		h := w.Header()
		h.Set("Content-Security-Policy", "default-src 'self'; img-src 'self' data:; frame-ancestors 'none'; form-action 'self'; base-uri 'none'")
		h.Set("X-Frame-Options", "DENY")
		h.Set("X-Content-Type-Options", "nosniff")
		h.Set("Referrer-Policy", "no-referrer")
		h.Set("Cache-Control", "no-store")
		if !s.hostOK(r.Host) {
			s.fail(w, r, http.StatusForbidden, "this dashboard answers only to loopback names and the hosts it was given, not to Host "+strconv.Quote(r.Host)+
				" (shepherd web: -listen on another address; a handler you mount: WithAllowedHosts or WithAnyHost)")
			return
		}
		if p := s.cfg.prefix; p != "" && r.URL.Path != p && !strings.HasPrefix(r.URL.Path, p+"/") {
			s.fail(w, r, http.StatusNotFound, "this dashboard serves the paths under "+p+"/, and "+strconv.Quote(r.URL.Path)+
				" is not one: mount it at "+p+"/ without http.StripPrefix")
			return
		}
		if s.cfg.token != "" && !s.isStatic(r) {
			if t := r.URL.Query().Get("token"); t != "" && r.Method == http.MethodGet && s.tokenOK(t) {
				// Keep the token in a cookie, and drop it from the address bar
				// (and from the history) at once.
				http.SetCookie(w, &http.Cookie{Name: tokenCookie, Value: t, Path: s.links.root(), HttpOnly: true, SameSite: http.SameSiteStrictMode})
				q := r.URL.Query()
				q.Del("token")
				u := url.URL{Path: r.URL.Path, RawPath: r.URL.RawPath, RawQuery: q.Encode()}
				http.Redirect(w, r, u.String(), http.StatusSeeOther)
				return
			}
			if !s.authorized(r) {
				w.Header().Set("WWW-Authenticate", `Bearer realm="shepherd"`)
				s.fail(w, r, http.StatusUnauthorized, "This dashboard needs its token. In a browser, open this address once with ?token=YOUR-TOKEN added "+
					"(the token then stays in a cookie and leaves the address bar); a program sends the header \"Authorization: Bearer YOUR-TOKEN\".")
				return
			}
		}
		if _, pattern := s.mux.Handler(r); pattern == "" {
			next.ServeHTTP(w, r) // no page: the mux answers 404, or 405 for a wrong method
			return
		}
		if r.Method == http.MethodPost {
			r.Body = http.MaxBytesReader(w, r.Body, 64<<10)
			if s.cfg.readOnly {
				s.fail(w, r, http.StatusForbidden, "this dashboard is read-only")
				return
			}
			if site := r.Header.Get("Sec-Fetch-Site"); site != "" && site != "same-origin" && site != "none" {
				s.fail(w, r, http.StatusForbidden, "a form from another site may not act here")
				return
			}
			if !hmac.Equal([]byte(r.PostFormValue("csrf")), []byte(s.csrfToken())) {
				s.fail(w, r, http.StatusForbidden, "missing or wrong CSRF token: reload the page and try again")
				return
			}
		}
		next.ServeHTTP(w, r)
	})
}

// isStatic reports whether r asks for a file of assets/static: the
// stylesheet and the script every page loads, the 401 page included. They
// hold no secret, so they are served without the token; every other
// guard still applies. A path that path.Clean would change is not one
// (the mux redirects it to its clean form, which is guarded as usual).
func (s *Handler) isStatic(r *http.Request) bool {
	if r.Method != http.MethodGet && r.Method != http.MethodHead {
		return false
	}
	p := r.URL.Path
	return strings.HasPrefix(p, s.links.static("")) && path.Clean(p) == p
}

// tokenOK compares t with the token in constant time.
func (s *Handler) tokenOK(t string) bool {
	return subtle.ConstantTimeCompare([]byte(t), []byte(s.cfg.token)) == 1
}

// authorized reports whether r carries the token. Every cookie of the
// name counts: dashboards mounted under several prefixes each set theirs.
func (s *Handler) authorized(r *http.Request) bool {
	if t, ok := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer "); ok && s.tokenOK(t) {
		return true
	}
	for _, c := range r.CookiesNamed(tokenCookie) {
		if s.tokenOK(c.Value) {
			return true
		}
	}
	return false
}

// csrfToken is the token every form carries. It is derived from this
// run's secret, which no other site can read.
func (s *Handler) csrfToken() string {
	m := hmac.New(sha256.New, s.secret)
	m.Write([]byte("csrf"))
	return hex.EncodeToString(m.Sum(nil))
}

// hostOK reports whether the dashboard answers to a Host header: any
// with WithAnyHost, else a loopback name or an allowed host.
func (s *Handler) hostOK(hostport string) bool {
	host := hostName(hostport)
	return s.cfg.anyHost || s.cfg.hosts[host] || loopbackHost(host)
}

// loopbackHost reports whether a host name (hostName's) names this
// machine's loopback: localhost, or a loopback IP.
func loopbackHost(host string) bool {
	if host == "localhost" {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}
