package pool

import (
	"context"
	"fmt"
	"time"

	"github.com/shepherd-go/shepherd/internal/redisutil"
)

// DefaultCallTimeout is WithCallTimeout's default.
const DefaultCallTimeout = 10 * time.Second

// WithCallTimeout bounds each Redis call that admits DispatchJob calls:
// under load one pipeline admits every DispatchJob of the node waiting at
// that moment, each with its own ctx, so no caller's ctx can bound it; a
// lone DispatchJob's call is bounded by its ctx and d, whichever ends
// first. A DispatchJob whose ctx ends first returns ctx.Err() at once. An
// admission that Redis does not answer within d fails its DispatchJob
// with an error wrapping ErrRedisTimeout, which does not match
// context.DeadlineExceeded; so does the client's own read or write
// timeout, if shorter (redis.Options.ReadTimeout, 5s by default). Either
// way the job is withdrawn (see DispatchJob). d must be positive.
// Defaults to 10s (DefaultCallTimeout).
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
