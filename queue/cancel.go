package queue

import (
	"context"
	"fmt"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/shepherd-go/shepherd/internal/script"
)

// Cancel cancels the task id: a task not running finishes at once as
// cancelled; a running one has its handler's ctx cancelled, and finishes
// as cancelled when the attempt ends (unless it succeeds). It returns
// ErrTaskNotFound for an unknown task, and nil for a task that had
// finished already (nothing changes). On a queue of n shards a caller's
// id is looked for in each shard in turn (up to n calls); an id this
// package made names its shard.
func (q *Client) Cancel(ctx context.Context, id string) error {
	if err := validID(id); err != nil {
		return err
	}
	all, err := q.layouts(ctx)
	if err != nil {
		return err
	}
	res, err := onShards(idLayouts(all, id), "NOTFOUND", func(l layout) (any, error) {
		return script.Run(ctx, q.rdb, cancelScript, "queue: cancel", l.common(l.task(id)), l.commonArgs(id)...)
	})
	if err != nil {
		return err
	}
	if res == "NOTFOUND" {
		return fmt.Errorf("%w: %q", ErrTaskNotFound, id)
	}
	return nil
}

// cancelTask ends the handler's ctx of a task cancelled by Cancel. The
// cancel message may come before the reply of the take that gave this
// process the task (pub/sub and the take use different connections): it
// is then kept, and taken applies it, so the task does not start. Kept
// cancels of tasks that never come are forgotten after earlyCancelTTL.
func (s *Server) cancelTask(id string) {
	s.mu.Lock()
	r := s.running[id]
	if r != nil {
		r.cancelled.Store(true) // under the lock: runTask sees it, or is seen
	} else {
		now := time.Now()
		if s.early == nil {
			s.early = make(map[string]time.Time)
		}
		for old, at := range s.early {
			if now.Sub(at) > earlyCancelTTL {
				delete(s.early, old)
			}
		}
		s.early[id] = now
	}
	s.mu.Unlock()
	if r != nil {
		r.cancel()
	}
}

// earlyCancelTTL is how long a cancel that came before its task is kept:
// a take's reply comes within its call's timeout, or never.
const earlyCancelTTL = time.Minute

// cancelScript cancels a task: one not running gets its outcome at once;
// one running is marked, and its process is told to end the handler's
// ctx (the outcome is recorded when the attempt ends; a success still
// wins).
//
//	KEYS[17] task key
//	ARGV[4] id
//
// Returns "NOTFOUND", "FINISHED", "REQUESTED" or "CANCELLED".
var cancelScript = redis.NewScript(prelude + finishFn + `
local res = cancelOne(KEYS[17], ARGV[4], now())
flush()
return res
`)
