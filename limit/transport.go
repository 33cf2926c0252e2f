package limit

import (
	"context"
	"errors"
	"net/http"
)

// Transport is an http.RoundTripper that admits outgoing requests through
// a Limiter, limiting the client side. Create it with NewTransport.
type Transport struct {
	base Limiter
	next http.RoundTripper
	cfg  *httpConfig
}

// NewTransport returns a Transport sending through next
// (http.DefaultTransport if nil). A request over the limit fails with an
// error wrapping ErrLimitExceeded before anything is sent. The outcome is
// measured to the response headers: 429, 503 and 504 responses and
// deadline errors are drops, other errors release without a sample, and the
// rest are successes. It returns an error wrapping ErrInvalidOption for a
// nil l or an invalid option (WithRetryAfter is accepted and unused).
func NewTransport(l Limiter, next http.RoundTripper, opts ...HTTPOption) (*Transport, error) {
	if l == nil {
		return nil, invalidf("transport limiter is nil")
	}
	c, err := newHTTPConfig(opts)
	if err != nil {
		return nil, err
	}
	if next == nil {
		next = http.DefaultTransport
	}
	return &Transport{base: l, next: next, cfg: c}, nil
}

// RoundTrip implements http.RoundTripper.
func (tr *Transport) RoundTrip(r *http.Request) (*http.Response, error) {
	ctx := r.Context()
	if tr.cfg.partition != nil {
		ctx = ContextWithPartition(ctx, tr.cfg.partition(r))
	}
	t, err := tr.base.Acquire(ctx)
	if err != nil {
		return nil, err
	}
	resp, err := tr.next.RoundTrip(r)
	switch {
	case err != nil && (errors.Is(err, context.DeadlineExceeded) || isTimeout(err)):
		t.Dropped()
	case err != nil:
		t.Ignore()
	case resp.StatusCode == http.StatusTooManyRequests ||
		resp.StatusCode == http.StatusServiceUnavailable ||
		resp.StatusCode == http.StatusGatewayTimeout:
		t.Dropped()
	default:
		t.Success()
	}
	return resp, err
}

func isTimeout(err error) bool {
	var te interface{ Timeout() bool }
	return errors.As(err, &te) && te.Timeout()
}
