package redisutil

import (
	"context"
	"errors"
	"net"
	"time"
)

// errCallTimeout is the cause of a CallContext's own deadline.
var errCallTimeout = errors.New("redisutil: call timeout")

// CallContext returns the ctx of one Redis call: parent, bounded by d.
// A call made for several callers at once (a batch of their requests)
// cannot run under any one caller's ctx; its bound is d, and TimedOut
// tells that bound running out from parent ending.
func CallContext(parent context.Context, d time.Duration) (context.Context, context.CancelFunc) {
	return context.WithTimeoutCause(parent, d, errCallTimeout)
}

// CallTimedOut reports whether ctx, from CallContext, ended because its
// own bound ran out (not because its parent ended).
func CallTimedOut(ctx context.Context) bool { return context.Cause(ctx) == errCallTimeout }

// TimedOut reports whether a call made under ctx (from CallContext)
// failed with err because Redis did not answer in time: ctx's own bound
// ran out first, or the client's own read or write timeout expired while
// ctx was live. It is false when ctx's parent ended first: err is then
// that ctx's error, and says so.
func TimedOut(ctx context.Context, err error) bool {
	// context.DeadlineExceeded is a net.Error that timed out, too.
	var ne net.Error
	if err == nil || !errors.As(err, &ne) || !ne.Timeout() {
		return false
	}
	switch context.Cause(ctx) {
	case errCallTimeout:
		return true
	case nil:
		return !errors.Is(err, context.DeadlineExceeded)
	}
	return false
}
