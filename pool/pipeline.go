package pool

import (
	"context"
	"fmt"

	"github.com/redis/go-redis/v9"
	"github.com/shepherd-go/shepherd/internal/redisutil"
	"github.com/shepherd-go/shepherd/internal/script"
)

// scriptCall is one run of a script in a pipeline, and its outcome.
type scriptCall struct {
	keys []string
	args []any
	res  any
	err  error
}

// runPipelined runs s once per call in one pipeline (one round trip for
// all of them) and stores each outcome in its call. Calls that found the
// script not loaded (a Redis restart flushed it) run again one by one
// through run, which loads it; so do calls Redis refused while the pool's
// slot moved to another master of a Redis Cluster (run waits for the
// move, script.Run).
func (n *Node) runPipelined(ctx context.Context, s *redis.Script, op string, calls []*scriptCall) {
	if len(calls) == 1 {
		c := calls[0]
		c.res, c.err = n.run(ctx, s, op, c.keys, c.args...)
		return
	}
	pipe := n.rdb.Pipeline()
	cmds := make([]*redis.Cmd, len(calls))
	for i, c := range calls {
		cmds[i] = s.EvalSha(ctx, pipe, script.WithGuard(c.keys), c.args...)
	}
	// Errors are per command, read below.
	_, _ = pipe.Exec(ctx)
	for i, c := range calls {
		c.res, c.err = cmds[i].Result()
		if redisutil.HasErrorCode(c.err, "NOSCRIPT") || script.Moving(c.err) {
			c.res, c.err = n.run(ctx, s, op, c.keys, c.args...)
		} else if c.err != nil && c.err != redis.Nil {
			c.err = wrapOp(op, c.err)
		}
	}
}

// wrapOp names a script error after its operation, as run does.
func wrapOp(op string, err error) error { return fmt.Errorf("pool: %s: %w", op, err) }

// scriptKeys builds the KEYS of a batch script: fixed keys first, then
// extra keys (streams the jobs of the batch go to), each once, numbered
// from 1 in the order added.
type scriptKeys struct {
	keys  []string
	fixed int
	index map[string]int
}

func newScriptKeys(fixed ...string) *scriptKeys {
	return &scriptKeys{keys: fixed, fixed: len(fixed), index: map[string]int{}}
}

// add returns key's number among the extra keys, adding it if need be.
func (k *scriptKeys) add(key string) int {
	if i, ok := k.index[key]; ok {
		return i
	}
	k.keys = append(k.keys, key)
	i := len(k.keys) - k.fixed
	k.index[key] = i
	return i
}

// perJob checks that a batch script answered once per job.
func perJob(res any, err error, jobs int, op string) ([]any, error) {
	if err != nil {
		return nil, err
	}
	out, _ := res.([]any)
	if len(out) != jobs {
		return nil, fmt.Errorf("pool: %s: %d replies for %d jobs", op, len(out), jobs)
	}
	return out, nil
}
