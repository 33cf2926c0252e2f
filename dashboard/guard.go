package dashboard

import (
	"crypto/hmac"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/hex"
	"net"
	"net/http"
	"net/url"
	"strings"
)

// tokenCookie holds the token of a browser that opened a page with
// ?token=.
const tokenCookie = "shepherd_token"

// guard wraps the pages with the checks every request passes, in order:
// the Host header, the token, the route (404, or 405 for a wrong method),
// and for a POST the read-only switch and the CSRF token. Every answer
// gets headers that keep the pages from being framed, sniffed or fed
// code from elsewhere.
func (s *Server) guard(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		h := w.Header()
		h.Set("Content-Security-Policy", "default-src 'self'; img-src 'self' data:; frame-ancestors 'none'; form-action 'self'; base-uri 'none'")
		h.Set("X-Frame-Options", "DENY")
		h.Set("X-Content-Type-Options", "nosniff")
		h.Set("Referrer-Policy", "no-referrer")
		h.Set("Cache-Control", "no-store")
		if !s.cfg.AnyHost && !loopbackHost(r.Host) {
			s.fail(w, r, http.StatusForbidden, "this dashboard answers only to localhost (Host "+r.Host+"); run it with -listen on another address to serve other names")
			return
		}
		if s.cfg.Token != "" {
			if t := r.URL.Query().Get("token"); t != "" && r.Method == http.MethodGet && s.tokenOK(t) {
				// Keep the token in a cookie, and drop it from the address bar
				// (and from the history) at once.
				http.SetCookie(w, &http.Cookie{Name: tokenCookie, Value: t, Path: "/", HttpOnly: true, SameSite: http.SameSiteStrictMode})
				q := r.URL.Query()
				q.Del("token")
				u := url.URL{Path: r.URL.Path, RawPath: r.URL.RawPath, RawQuery: q.Encode()}
				http.Redirect(w, r, u.String(), http.StatusSeeOther)
				return
			}
			if !s.authorized(r) {
				w.Header().Set("WWW-Authenticate", `Bearer realm="shepherd"`)
				s.fail(w, r, http.StatusUnauthorized, "this dashboard needs its token: open it once with ?token=TOKEN, or send Authorization: Bearer TOKEN")
				return
			}
		}
		if _, pattern := s.mux.Handler(r); pattern == "" {
			next.ServeHTTP(w, r) // no page: the mux answers 404, or 405 for a wrong method
			return
		}
		if r.Method == http.MethodPost {
			r.Body = http.MaxBytesReader(w, r.Body, 64<<10)
			if s.cfg.ReadOnly {
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

// tokenOK compares t with the token in constant time.
func (s *Server) tokenOK(t string) bool {
	return subtle.ConstantTimeCompare([]byte(t), []byte(s.cfg.Token)) == 1
}

// authorized reports whether r carries the token.
func (s *Server) authorized(r *http.Request) bool {
	if t, ok := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer "); ok && s.tokenOK(t) {
		return true
	}
	c, err := r.Cookie(tokenCookie)
	return err == nil && s.tokenOK(c.Value)
}

// csrfToken is the token every form carries. It is derived from this
// run's secret, which no other site can read.
func (s *Server) csrfToken() string {
	m := hmac.New(sha256.New, s.secret)
	m.Write([]byte("csrf"))
	return hex.EncodeToString(m.Sum(nil))
}

// loopbackHost reports whether a Host header names this machine's
// loopback: localhost, or a loopback IP.
func loopbackHost(hostport string) bool {
	host := hostport
	if h, _, err := net.SplitHostPort(hostport); err == nil {
		host = h
	}
	host = strings.Trim(host, "[]")
	if strings.EqualFold(host, "localhost") {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}
