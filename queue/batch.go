package queue

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/shepherd-go/shepherd/internal/backoff"
)

// Policy is how a batch treats its tasks' failures.
type Policy int

const (
	// FailFast: the first task that fails finally (or is cancelled)
	// fails the batch. In the same step, Redis cancels the batch's other
	// tasks: those not started are ended (removed from the queue), those
	// running get their ctx cancelled. Wait returns that task's error.
	FailFast Policy = iota
	// CollectAll: every task runs to its end; Wait returns the errors of
	// all those that failed, joined (errors.Join), once all have ended.
	CollectAll
)

func (p Policy) code() string {
	if p == CollectAll {
		return "ca"
	}
	return "ff"
}

func (p Policy) String() string {
	switch p {
	case FailFast:
		return "fail-fast"
	case CollectAll:
		return "collect-all"
	}
	return fmt.Sprintf("Policy(%d)", int(p))
}

// A Batch groups tasks that are waited for as one, under a Policy. Its
// state is in Redis: any process can wait for it by id (WaitBatch), also
// after the process that made it is gone. A Batch is safe for concurrent
// use.
type Batch struct {
	q      *Queue
	id     string
	policy Policy

	mu    sync.Mutex
	shard int // its shard, -1 until its first Submit (sharded queues)
}

// NewBatch returns a new, empty batch. Nothing is written until its first
// Submit. An unknown policy is treated as FailFast.
func (q *Queue) NewBatch(policy Policy) *Batch {
	if policy != CollectAll {
		policy = FailFast
	}
	return &Batch{q: q, id: newTaskID(), policy: policy, shard: -1}
}

// ID returns the batch's id, for WaitBatch from any process.
func (b *Batch) ID() string { return b.id }

// Submit submits a task into the batch, as Queue.Submit (with the same
// options and errors), and ErrBatchFailed once a FailFast batch has
// failed: the task is then not queued.
func (b *Batch) Submit(ctx context.Context, payload []byte, opts ...SubmitOption) (*Future, error) {
	all := make([]SubmitOption, 0, len(opts)+1)
	all = append(all, opts...)
	all = append(all, func(c *submitConfig) error {
		c.batch, c.policy, c.batchOf = b.id, b.policy, b
		return nil
	})
	return b.q.Submit(ctx, payload, all...)
}

// place is the shard of a task of the batch whose own would be shard
// (-1: none, it follows the batch) on a sharded queue: the batch lives in
// one shard, so that a failure cancels the others in the same script.
// Its first task's shard is the batch's (its tenant's, or the batch id's
// shard); a tenant's task on another shard is refused.
func (b *Batch) place(shard int, tenant string) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.shard < 0 {
		if shard < 0 {
			shard = shardOfKey(b.id, len(b.q.known()))
		}
		b.shard = shard
	}
	if shard >= 0 && shard != b.shard {
		return 0, invalid("on a sharded queue a batch's tasks share a shard: tenant %q is on shard %d, the batch %s on shard %d", tenant, shard, b.id, b.shard)
	}
	return b.shard, nil
}

// Wait waits for the batch (see WaitBatch); a batch with no task returns
// nil at once.
func (b *Batch) Wait(ctx context.Context) error {
	err := b.q.WaitBatch(ctx, b.id)
	if errors.Is(err, ErrBatchNotFound) {
		return nil
	}
	return err
}

// WaitBatch waits for the batch id's tasks submitted so far, from any
// process: FailFast returns the first failed task's *TaskError as soon as
// one failed (the others are cancelled already), or nil once all
// succeeded; CollectAll returns, once all ended, errors.Join of the
// failed tasks' *TaskError (nil if none failed). It returns ctx's error
// if ctx ends first, ErrBatchNotFound for a batch with no task or whose
// retention is over. It polls Redis (every 5ms, slowing to 100ms).
func (q *Client) WaitBatch(ctx context.Context, id string) error {
	if err := validID(id); err != nil {
		return err
	}
	l, err := q.batchLayout(ctx, id)
	if err != nil {
		return err
	}
	bo := backoff.Backoff{Min: 5 * time.Millisecond, Max: 100 * time.Millisecond}
	for {
		v, err := q.rdb.HMGet(ctx, l.batch(id), "pol", "n", "done", "first").Result()
		if err != nil {
			return fmt.Errorf("queue: wait for batch: %w", err)
		}
		pol, _ := v[0].(string)
		if pol == "" {
			return fmt.Errorf("%w: %q", ErrBatchNotFound, id)
		}
		n, _ := strconv.ParseInt(str(v[1]), 10, 64)
		done, _ := strconv.ParseInt(str(v[2]), 10, 64)
		first := str(v[3])
		switch {
		case pol == "ff" && first != "":
			return q.finalError(ctx, first)
		case done >= n && pol == "ff":
			return nil
		case done >= n:
			return q.batchErrors(ctx, l, id)
		}
		if !backoff.Sleep(bo.Next(), ctx.Done()) {
			return ctx.Err()
		}
	}
}

func str(v any) string { s, _ := v.(string); return s }

// finalError is the *TaskError a finished task ended with (nil if it
// succeeded).
func (q *Client) finalError(ctx context.Context, id string) error {
	_, err := q.Result(ctx, id)
	var te *TaskError
	if err == nil || errors.As(err, &te) {
		return err
	}
	return fmt.Errorf("queue: batch task %s: %w", id, err)
}

// batchErrors joins the errors of a finished batch's failed tasks, read
// with one pipeline per 1,000 tasks.
func (q *Client) batchErrors(ctx context.Context, l layout, id string) error {
	ids, err := q.rdb.LRange(ctx, l.batchTasks(id), 0, -1).Result()
	if err != nil {
		return fmt.Errorf("queue: wait for batch: %w", err)
	}
	var errs []error
	for start := 0; start < len(ids); start += 1000 {
		part := ids[start:min(start+1000, len(ids))]
		pipe := q.rdb.Pipeline()
		cmds := make([]*taskRead, len(part))
		for i, tid := range part {
			cmds[i] = readTask(ctx, pipe, l, tid, outcomeFields...)
		}
		if _, err := pipe.Exec(ctx); err != nil && !errors.Is(err, redis.Nil) {
			return fmt.Errorf("queue: wait for batch: %w", err)
		}
		for i, tid := range part {
			st, _, err := storedOutcome(tid, cmds[i].Val())
			switch {
			case st == "":
				errs = append(errs, fmt.Errorf("queue: batch task %s: %w", tid, ErrTaskNotFound))
			case !finished(st):
				errs = append(errs, fmt.Errorf("queue: batch task %s: %w (%s)", tid, ErrNotFinished, st))
			case err != nil:
				errs = append(errs, err)
			}
		}
	}
	return errors.Join(errs...)
}

// batchLayout is the layout of the shard that holds the batch id: the
// home shard's on a queue of one shard; else the first shard whose
// record of it Redis holds (one read per shard; ErrBatchNotFound when
// none does).
func (q *Client) batchLayout(ctx context.Context, id string) (layout, error) {
	all, err := q.layouts(ctx)
	if err != nil {
		return layout{}, fmt.Errorf("queue: wait for batch: %w", err)
	}
	if len(all) == 1 {
		return all[0], nil
	}
	for _, l := range all {
		n, err := q.rdb.Exists(ctx, l.batch(id)).Result()
		if err != nil {
			return layout{}, fmt.Errorf("queue: wait for batch: %w", err)
		}
		if n == 1 {
			return l, nil
		}
	}
	return layout{}, fmt.Errorf("%w: %q", ErrBatchNotFound, id)
}
