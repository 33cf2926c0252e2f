package queue

import (
	"context"
	"fmt"
	"runtime/debug"
)

// call runs the handler, turning a panic into an error.
func call(ctx context.Context, sl slot, t *Task) (res []byte, err error, panicked bool) {
	defer func() {
		if p := recover(); p != nil {
			res, err, panicked = nil, fmt.Errorf("panic: %v\n%s", p, debug.Stack()), true
		}
	}()
	res, err = sl.handle(ctx, t)
	return res, err, false
}
