package queue

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"
)

// Future is the outcome of a submitted task. It completes exactly once:
// with the handler's result, or with a *TaskError when the task failed
// finally or was cancelled (or with ErrClosed or ErrOutcomeLost, see
// Wait). It is safe for concurrent use.
type Future struct {
	id   string
	done chan struct{}
	once sync.Once
	res  []byte
	err  error

	submitted atomic.Bool // Submit's script answered OK
	duplicate bool        // Submit refused its task as a duplicate (WithDedup): this follows the first task
	q         *Queue      // for Progress
	shard     int         // the shard its Submit placed the task in; -1: not known (idLayouts)
}

func newFuture(q *Queue, id string) *Future {
	return &Future{id: id, q: q, done: make(chan struct{}), shard: -1}
}

// ID returns the task's id, for Result, Inspect and Cancel from any
// process.
func (f *Future) ID() string { return f.id }

// Done is closed when the future completes.
func (f *Future) Done() <-chan struct{} { return f.done }

// Wait waits until the future completes or ctx ends, and returns the
// result or the final error: a *TaskError (errors.Is ErrFailed or
// ErrCancelled), ErrClosed when this process's Queue was closed first,
// ErrOutcomeLost when the task vanished from Redis without an outcome, or
// ctx's error (the task goes on; its outcome stays readable with Result
// during its retention).
func (f *Future) Wait(ctx context.Context) ([]byte, error) {
	select {
	case <-f.done:
		return f.res, f.err
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}

func (f *Future) complete(res []byte, err error) {
	f.once.Do(func() {
		f.res, f.err = res, err
		close(f.done)
	})
}

// outcomeMessage completes the futures of a message on the done
// channel: one record per outcome, each "len(id)\nstate\nattempts\n
// len(errs)\nlen(result)\n" then the id, the errors and the result.
func (q *Queue) outcomeMessage(msg string) {
	for msg != "" {
		var head [5]string
		rest := msg
		for i := range head {
			nl := strings.IndexByte(rest, '\n')
			if nl < 0 {
				q.logger.Warn("malformed outcome message", "message", msg)
				return
			}
			head[i], rest = rest[:nl], rest[nl+1:]
		}
		idLen, err1 := strconv.Atoi(head[0])
		errsLen, err2 := strconv.Atoi(head[3])
		resLen, err3 := strconv.Atoi(head[4])
		if err1 != nil || err2 != nil || err3 != nil || idLen < 0 || errsLen < 0 || resLen < 0 ||
			idLen+errsLen+resLen > len(rest) {
			q.logger.Warn("malformed outcome message", "message", msg)
			return
		}
		id := rest[:idLen]
		errs := rest[idLen : idLen+errsLen]
		res := rest[idLen+errsLen : idLen+errsLen+resLen]
		msg = rest[idLen+errsLen+resLen:]
		if q.cfg.ack.On() {
			// Completed once the outcome is confirmed on the replicas.
			q.mu.Lock()
			f := q.futures[id]
			q.mu.Unlock()
			if f != nil {
				q.outcomeHeard(f)
			}
			continue
		}
		q.mu.Lock()
		f := q.futures[id]
		delete(q.futures, id)
		q.mu.Unlock()
		if f != nil {
			f.complete(outcome(id, head[1], errs, res))
		}
	}
}

// outcome turns a finished task's fields into what Wait returns.
func outcome(id, state, errs, res string) ([]byte, error) {
	switch state {
	case "done":
		return []byte(res), nil
	case "dead", "cancelled":
		return nil, &TaskError{ID: id, Cancelled: state == "cancelled", Attempts: parseAttempts(errs)}
	}
	return nil, fmt.Errorf("queue: task %s in unexpected state %q", id, state)
}

func parseAttempts(s string) []AttemptError {
	if s == "" {
		return nil
	}
	var list []struct {
		A int    `json:"a"`
		E string `json:"e"`
		T int64  `json:"t"`
		S string `json:"s"`
	}
	if err := json.Unmarshal([]byte(s), &list); err != nil {
		return []AttemptError{{Err: "unreadable error list: " + s}}
	}
	out := make([]AttemptError, len(list))
	for i, a := range list {
		out[i] = AttemptError{Attempt: a.A, Err: a.E, At: time.UnixMilli(a.T), Stack: a.S}
	}
	return out
}

func finished(state string) bool { return state == "done" || state == "dead" || state == "cancelled" }

// Result returns the outcome of the task id, from any process: its
// result, its final *TaskError, ErrNotFinished while it has none, or
// ErrTaskNotFound when the queue does not know it (never submitted, or its
// retention is over). On a queue of n shards it reads as Inspect does:
// one read for an id this package made, up to n for a caller's.
func (q *Client) Result(ctx context.Context, id string) ([]byte, error) {
	if err := validID(id); err != nil {
		return nil, err
	}
	all, err := q.layouts(ctx)
	if err != nil {
		return nil, err
	}
	_, v, _, err := q.findTask(ctx, all, id, outcomeFields...)
	if err != nil {
		return nil, fmt.Errorf("queue: result: %w", err)
	}
	st, res, err := storedOutcome(id, v)
	switch {
	case st == "":
		return nil, fmt.Errorf("%w: %q", ErrTaskNotFound, id)
	case !finished(st):
		return nil, fmt.Errorf("%w: %q is %s", ErrNotFinished, id, st)
	}
	return res, err
}

// outcomeFields are the task fields storedOutcome reads.
var outcomeFields = []string{fieldState, fieldErrors, fieldResult}

// storedOutcome reads the task's state from its outcomeFields and, once
// it is finished, what Wait returns. st is "" for a missing task.
func storedOutcome(id string, v []any) (st string, res []byte, err error) {
	if len(v) != len(outcomeFields) {
		return "", nil, nil
	}
	st, _ = v[0].(string)
	if !finished(st) {
		return st, nil, nil
	}
	errs, _ := v[1].(string)
	r, _ := v[2].(string)
	res, err = outcome(id, st, errs, r)
	return st, res, err
}

// pollEvery is how often a process reads the outcomes of its pending
// futures, in case their pub/sub message was lost (a reconnect).
const pollEvery = time.Second

// pollFutures completes, every pollEvery, the futures whose task has an
// outcome that no message brought, and those whose task vanished.
func (q *Queue) pollFutures() {
	ctx := q.tasks.Context()
	t := time.NewTicker(pollEvery)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		q.pollOnce(ctx)
	}
}

// pollOnce reads the outcomes of up to 1000 pending futures. Only futures
// whose Submit had succeeded before the read are judged: a task missing
// then may just not be written yet.
func (q *Queue) pollOnce(ctx context.Context) {
	if pending := q.pendingFutures(1000); len(pending) > 0 {
		q.pollOutcomes(ctx, pending)
	}
}

// pendingFutures returns up to n futures whose Submit succeeded.
func (q *Queue) pendingFutures(n int) []*Future {
	q.mu.Lock()
	defer q.mu.Unlock()
	pending := make([]*Future, 0, min(len(q.futures), n))
	for _, f := range q.futures {
		if len(pending) == cap(pending) {
			break
		}
		if f.submitted.Load() {
			pending = append(pending, f)
		}
	}
	return pending
}

// pollOutcomes reads the outcomes of pending futures in one pipeline,
// each in the shard its id names; a caller's id on a queue of n shards is
// read in every shard where it may be (idLayouts), and counts as lost only
// when none holds it. With WithReplicas, each shard's reads are confirmed
// on the replicas first (confirmOutcomes). It returns the ids of the
// futures it ended with ErrOutcomeLost.
func (q *Queue) pollOutcomes(ctx context.Context, pending []*Future) (lost []string) {
	if q.cfg.ack.On() {
		return q.confirmOutcomes(ctx, pending)
	}
	cctx, cancel := context.WithTimeout(ctx, loopCallTimeout)
	defer cancel()
	all := q.known()
	pipe := q.rdb.Pipeline()
	cmds := make([][]*taskRead, len(pending))
	for i, f := range pending {
		where := idLayouts(all, f.id)
		if f.shard >= 0 && f.shard < len(all) {
			where = all[f.shard : f.shard+1] // one read, also for a caller's id
		}
		for _, l := range where {
			cmds[i] = append(cmds[i], readTask(cctx, pipe, l, f.id, outcomeFields...))
		}
	}
	if _, err := pipe.Exec(cctx); err != nil && !errors.Is(err, redis.Nil) {
		if ctx.Err() == nil {
			q.logger.Debug("polling outcomes failed", "error", err)
		}
		return nil
	}
	if q.testAfterPollRead != nil {
		q.testAfterPollRead()
	}
	for i, f := range pending {
		var v []any
		for _, c := range cmds[i] {
			if v = c.Val(); len(v) != len(outcomeFields) || present(v) {
				break
			}
		}
		if len(v) != len(outcomeFields) {
			continue
		}
		st, res, err := storedOutcome(f.id, v)
		switch {
		case st == "":
			q.forget(f)
			f.complete(nil, fmt.Errorf("%w: %q", ErrOutcomeLost, f.id))
			lost = append(lost, f.id)
		case finished(st):
			q.forget(f)
			f.complete(res, err)
		}
	}
	return lost
}
