package dashboard

import (
	"errors"
	"fmt"
	"log/slog"
	"net"
	"strings"
	"time"
)

// Defaults of the options.
const (
	// DefaultRefreshEvery is how often an open page fetches its live part
	// again.
	DefaultRefreshEvery = time.Second
	// DefaultActionTimeout bounds an action such as stopping a job.
	DefaultActionTimeout = 15 * time.Second
)

// ErrInvalidOption is returned by New for a nil Redis client or an
// invalid option value; the error wrapping it says which.
var ErrInvalidOption = errors.New("dashboard: invalid option")

// Option configures a dashboard in New.
type Option func(*config) error

type config struct {
	token         string
	csrfKey       []byte // WithCSRFKey; nil: a random one per Handler
	readOnly      bool
	prefix        string // "" or "/a/b": no trailing slash
	anyHost       bool
	hosts         map[string]bool // allowed besides loopback, lower case, no port
	logger        *slog.Logger
	refreshEvery  time.Duration
	actionTimeout time.Duration
}

func defaultConfig() config {
	return config{
		hosts:         map[string]bool{},
		logger:        slog.New(slog.DiscardHandler),
		refreshEvery:  DefaultRefreshEvery,
		actionTimeout: DefaultActionTimeout,
	}
}

// WithToken requires token of every request: as the cookie set by opening
// any page once with ?token=TOKEN (the redirect that follows drops it from
// the address), or as an "Authorization: Bearer TOKEN" header. An empty
// token requires none. Defaults to none: set one, or put the handler
// behind your own authentication, whenever it is reachable by anyone but
// you.
func WithToken(token string) Option {
	return func(c *config) error {
		c.token = token
		return nil
	}
}

// MinCSRFKeySize is the shortest key WithCSRFKey takes.
const MinCSRFKeySize = 32

// WithCSRFKey keys the token every form carries with key (at least
// MinCSRFKeySize random bytes, kept secret): replicas of a dashboard
// behind one load balancer given the same key accept each other's forms.
// Defaults to a random key per Handler, so that without it a form must be
// posted to the replica that served its page (sticky sessions).
func WithCSRFKey(key []byte) Option {
	return func(c *config) error {
		if len(key) < MinCSRFKeySize {
			return fmt.Errorf("%w: CSRF key of %d bytes, want at least %d", ErrInvalidOption, len(key), MinCSRFKeySize)
		}
		c.csrfKey = append([]byte(nil), key...)
		return nil
	}
}

// WithReadOnly, when readOnly is true, hides every action and refuses
// every POST with 403. Defaults to false: the pages offer the operators'
// actions, each confirmed first.
func WithReadOnly(readOnly bool) Option {
	return func(c *config) error {
		c.readOnly = readOnly
		return nil
	}
}

// WithPrefix serves the dashboard under a path prefix, such as
// "/ops/shepherd": its pages, actions, redirects, static files and token
// cookie are all under prefix+"/". Mount the handler at that path of your
// mux without http.StripPrefix:
//
//	mux.Handle("/ops/shepherd/", dash)
//
// A request outside the prefix gets 404. The prefix starts with "/" and
// holds only letters, digits and "-._~" between its slashes; a trailing
// slash is dropped, and "/" is the root. Defaults to the root.
func WithPrefix(prefix string) Option {
	return func(c *config) error {
		p, err := cleanPrefix(prefix)
		if err != nil {
			return err
		}
		c.prefix = p
		return nil
	}
}

// cleanPrefix checks a path prefix and drops its trailing slash.
func cleanPrefix(prefix string) (string, error) {
	if prefix == "" || prefix == "/" {
		return "", nil
	}
	p := strings.TrimSuffix(prefix, "/")
	if !strings.HasPrefix(p, "/") {
		return "", fmt.Errorf("%w: prefix %q does not start with /", ErrInvalidOption, prefix)
	}
	for _, seg := range strings.Split(p[1:], "/") {
		if seg == "" || seg == "." || seg == ".." {
			return "", fmt.Errorf("%w: prefix %q has an empty, . or .. segment", ErrInvalidOption, prefix)
		}
		for _, r := range seg {
			if !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || strings.ContainsRune("-._~", r)) {
				return "", fmt.Errorf("%w: prefix %q holds %q: only letters, digits and -._~ may come between its slashes", ErrInvalidOption, prefix, r)
			}
		}
	}
	return p, nil
}

// WithAllowedHosts adds host names the dashboard answers to, besides the
// loopback ones (localhost, 127.0.0.1, [::1]); a port given with a name
// is ignored, as is the port of the request's Host. A request for any
// other Host gets 403: that keeps a web page elsewhere from reaching a
// dashboard on your machine by DNS rebinding. Defaults to none: the
// dashboard answers to loopback names only. Mounted in a service that
// others reach by name, list its names here, or see WithAnyHost.
func WithAllowedHosts(hosts ...string) Option {
	return func(c *config) error {
		for _, h := range hosts {
			name := hostName(h)
			if name == "" || strings.ContainsAny(name, "/ ") {
				return fmt.Errorf("%w: allowed host %q is not a host name", ErrInvalidOption, h)
			}
			c.hosts[name] = true
		}
		return nil
	}
}

// WithAnyHost, when anyHost is true, answers to any Host header: for a
// dashboard reached by names you cannot list, behind a proxy that checks
// them. Defaults to false (see WithAllowedHosts).
func WithAnyHost(anyHost bool) Option {
	return func(c *config) error {
		c.anyHost = anyHost
		return nil
	}
}

// WithLogger sets the logger of the actions taken and the errors met.
// Defaults to a logger that discards everything.
func WithLogger(l *slog.Logger) Option {
	return func(c *config) error {
		if l == nil {
			return fmt.Errorf("%w: nil logger", ErrInvalidOption)
		}
		c.logger = l
		return nil
	}
}

// WithRefreshEvery sets how often an open page fetches its live part
// again (?partial=1). Defaults to DefaultRefreshEvery (1s).
func WithRefreshEvery(d time.Duration) Option {
	return positive("refresh period", d, func(c *config) { c.refreshEvery = d })
}

// WithActionTimeout bounds an action, such as stopping a job, from the
// POST to its answer. Page reads are bounded by 5s. Defaults to
// DefaultActionTimeout (15s).
func WithActionTimeout(d time.Duration) Option {
	return positive("action timeout", d, func(c *config) { c.actionTimeout = d })
}

// positive is an option that sets a duration, which must be positive.
func positive(name string, d time.Duration, set func(*config)) Option {
	return func(c *config) error {
		if d <= 0 {
			return fmt.Errorf("%w: %s must be positive, got %v", ErrInvalidOption, name, d)
		}
		set(c)
		return nil
	}
}

// hostName is the name of a Host header or an allowed host: without its
// port and brackets, in lower case.
func hostName(hostport string) string {
	host := hostport
	if h, _, err := net.SplitHostPort(hostport); err == nil {
		host = h
	}
	return strings.ToLower(strings.Trim(host, "[]"))
}
