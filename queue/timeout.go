package queue

import (
	"context"
	"errors"
	"time"
)

// errLateResult is what an attempt whose handler returned a result after
// its deadline failed with (see WithTimeout).
var errLateResult = errors.New("the handler returned a result after its deadline; the result was dropped")

// pastDeadline reports whether an attempt whose handler returned at
// returned has timed out: whether ctx's deadline had passed by then. It
// is decided by the return time, not by ctx.Err() when the worker looks,
// so that a return just before the deadline is in time however late it
// is judged, and one after it is late even if ctx's timer has not fired
// yet. Both times carry the monotonic clock.
func pastDeadline(ctx context.Context, returned time.Time) bool {
	d, ok := ctx.Deadline()
	return ok && !returned.Before(d)
}
