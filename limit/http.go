package limit

import (
	"errors"
	"math"
	"net/http"
	"strconv"
	"time"
)

// DefaultRetryAfter is the Retry-After the middleware sends by default.
const DefaultRetryAfter = time.Second

// HTTPOption configures Middleware and Transport.
type HTTPOption func(*httpConfig)

type httpConfig struct {
	partition  func(*http.Request) string
	retryAfter time.Duration
}

func newHTTPConfig(opts []HTTPOption) (*httpConfig, error) {
	c := &httpConfig{retryAfter: DefaultRetryAfter}
	for _, o := range opts {
		o(c)
	}
	if c.retryAfter <= 0 {
		return nil, invalidf("Retry-After must be positive, got %v", c.retryAfter)
	}
	return c, nil
}

// WithRequestPartition sets a function that names a request's partition
// (from a header, the authenticated principal...); the name is put in the
// request's context with ContextWithPartition, where a Partitioned limiter
// with the default resolver finds it. Defaults to none.
func WithRequestPartition(f func(*http.Request) string) HTTPOption {
	return func(c *httpConfig) { c.partition = f }
}

// WithRetryAfter sets the delay the middleware advises rejected clients to
// wait, sent in whole seconds (rounded up). Defaults to DefaultRetryAfter.
func WithRetryAfter(d time.Duration) HTTPOption {
	return func(c *httpConfig) { c.retryAfter = d }
}

// Middleware returns net/http middleware admitting requests through l.
//
// A request over the limit gets 429 Too Many Requests with a Retry-After
// header (a request whose context ends while a Blocking limiter waits gets
// 503). The handler's response decides the outcome: 503 and 504 are
// drops, which make the limit back off; a panic releases the slot without
// a sample and is re-raised; anything else is a success. It returns an
// error wrapping ErrInvalidOption for a nil l or an invalid option.
func Middleware(l Limiter, opts ...HTTPOption) (func(http.Handler) http.Handler, error) {
	if l == nil {
		return nil, invalidf("middleware limiter is nil")
	}
	c, err := newHTTPConfig(opts)
	if err != nil {
		return nil, err
	}
	retryAfter := strconv.Itoa(int(math.Ceil(c.retryAfter.Seconds())))
	return func(next http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if c.partition != nil {
				r = r.WithContext(ContextWithPartition(r.Context(), c.partition(r)))
			}
			t, err := l.Acquire(r.Context())
			if err != nil {
				if errors.Is(err, ErrLimitExceeded) {
					w.Header().Set("Retry-After", retryAfter)
					http.Error(w, "concurrency limit exceeded", http.StatusTooManyRequests)
					return
				}
				http.Error(w, "request cancelled while waiting", http.StatusServiceUnavailable)
				return
			}
			sw := &statusWriter{ResponseWriter: w}
			defer func() {
				if p := recover(); p != nil {
					t.Ignore()
					panic(p)
				}
			}()
			next.ServeHTTP(sw, r)
			if sw.status == http.StatusServiceUnavailable || sw.status == http.StatusGatewayTimeout {
				t.Dropped()
			} else {
				t.Success()
			}
		})
	}, nil
}

// statusWriter records the status code. Unwrap lets http.ResponseController
// reach the original writer's Flush, Hijack and deadlines.
type statusWriter struct {
	http.ResponseWriter
	status int
}

func (s *statusWriter) WriteHeader(code int) {
	if s.status == 0 {
		s.status = code
	}
	s.ResponseWriter.WriteHeader(code)
}

func (s *statusWriter) Write(b []byte) (int, error) {
	if s.status == 0 {
		s.status = http.StatusOK
	}
	return s.ResponseWriter.Write(b)
}

func (s *statusWriter) Unwrap() http.ResponseWriter { return s.ResponseWriter }
