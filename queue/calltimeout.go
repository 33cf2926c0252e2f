package queue

import (
	"context"
	"fmt"
	"time"

	"github.com/shepherd-go/shepherd/internal/redisutil"
)

// DefaultCallTimeout is WithCallTimeout's default.
const DefaultCallTimeout = 5 * time.Second

// WithCallTimeout bounds each Redis call that a Queue makes for Submits:
// the script call that queues a batch of them, and each attempt to
// withdraw a failed one. A process's concurrent Submits share one call,
// each with its own ctx, so no caller's ctx bounds it: a Submit whose ctx
// ends first returns ctx.Err() at once (its task is withdrawn) while the
// call goes on for the others. A call that Redis does not answer within d
// fails each Submit it carries with an error wrapping ErrRedisTimeout,
// which does not match context.DeadlineExceeded; so does the client's own
// read or write timeout, if shorter (redis.Options.ReadTimeout, 5s by
// default). Those tasks are withdrawn too. d must be positive. Defaults
// to 5s (DefaultCallTimeout).
func WithCallTimeout(d time.Duration) Option {
	return func(c *config) error {
		if d <= 0 {
			return invalid("call timeout must be positive, got %v", d)
		}
		c.callTimeout = d
		return nil
	}
}

// redisTimeout returns err, the error of a call made under cctx (from
// redisutil.CallContext), unless Redis did not answer it in time: then an
// error wrapping ErrRedisTimeout, which claims no ctx ended.
func (q *Queue) redisTimeout(cctx context.Context, op string, err error) error {
	if !redisutil.TimedOut(cctx, err) {
		return err
	}
	if redisutil.CallTimedOut(cctx) {
		return fmt.Errorf("%w: %s: no answer within %v (WithCallTimeout)", ErrRedisTimeout, op, q.cfg.callTimeout)
	}
	return fmt.Errorf("%w: %w", ErrRedisTimeout, err) // the client's own timeout
}
