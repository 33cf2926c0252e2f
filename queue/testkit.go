package queue

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/shepherd-go/shepherd/internal/taskkit"
)

// The test kit (package shepherdtest) runs a handler with a real *Task
// and no Redis through taskkit.Run, so that no exported function of this
// package exists for tests alone.
func init() { taskkit.Run = runAlone }

// runAlone runs h on the task s describes as a worker runs an attempt
// (runTask): with the attempt's timeout on ctx, a panic turned into an
// error, a result returned after the deadline dropped, and the end
// classified as classify does. Task.Progress calls go to s.Progress
// instead of Redis.
func runAlone(ctx context.Context, h any, s taskkit.Spec) taskkit.Ended {
	handler, ok := h.(Handler)
	if !ok || handler == nil {
		panic(fmt.Sprintf("queue: test kit: handler is %T, not a non-nil Handler", h))
	}
	t := &Task{ID: s.ID, Payload: s.Payload, Attempt: s.Attempt, MaxAttempts: s.MaxAttempts, Tenant: s.Tenant,
		timeout: s.Timeout, report: s.Progress}
	ctx, cancel := context.WithTimeout(ctx, s.Timeout)
	defer cancel()
	sl := &resourceSlot[struct{}]{h: func(ctx context.Context, _ struct{}, t *Task) ([]byte, error) { return handler(ctx, t) }}
	res, err, panicked := call(ctx, sl, t)
	e := taskkit.Ended{Panicked: panicked, TimedOut: pastDeadline(ctx, time.Now()), Stack: stackOf(err)}
	if e.TimedOut && err == nil && !panicked {
		res, err = nil, errLateResult
	}
	e.Result, e.Err = res, err
	var later *laterError
	var perm *permanentError
	switch {
	case err == nil && len(res) > s.MaxResultSize:
		e.Kind, e.Result = "perm", nil
		e.Err = fmt.Errorf("%w: the result has %d bytes, MaxPayloadSize is %d", ErrPayloadTooLarge, len(res), s.MaxResultSize)
	case err == nil:
		e.Kind = "ok"
	case errors.As(err, &later):
		e.Kind, e.Delay = "later", max(later.d, time.Millisecond)
	case errors.As(err, &perm):
		e.Kind = "perm"
	default:
		e.Kind = "fail"
	}
	return e
}
