package pool

import (
	"context"
	"fmt"
	"time"

	"github.com/shepherd-go/shepherd/internal/redisutil"
)

// WithCallTimeout bounds each Redis call that admits DispatchJob calls:
// one pipeline may admit many calls, so no caller's ctx can bound it (a
// DispatchJob whose ctx ends first still returns ctx.Err() at once). An
// admission not answered within d, or within the client's read or write
// timeout if shorter, fails with an error wrapping ErrRedisTimeout and is
// withdrawn (see DispatchJob). d must be positive. Defaults to 10s
// (DefaultCallTimeout).
func WithCallTimeout(d time.Duration) NodeOption {
	return func(c *nodeConfig) error {
		if err := positive("call timeout", d); err != nil {
			return err
		}
		c.callTimeout = d
		return nil
	}
}

// redisTimeout returns err, the error of a call made under cctx (from
// redisutil.CallContext), unless Redis did not answer it in time: then an
// error wrapping ErrRedisTimeout, which claims no ctx ended.
func (n *Node) redisTimeout(cctx context.Context, op string, err error) error {
	if !redisutil.TimedOut(cctx, err) {
		return err
	}
	if redisutil.CallTimedOut(cctx) {
		return fmt.Errorf("%w: %s: no answer within %v (WithCallTimeout)", ErrRedisTimeout, op, n.cfg.callTimeout)
	}
	return fmt.Errorf("%w: %w", ErrRedisTimeout, err) // the client's own timeout
}
