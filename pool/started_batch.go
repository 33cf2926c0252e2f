package pool

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/redis/go-redis/v9"
	"github.com/shepherd-go/shepherd/internal/streamfields"
)

// A node's workers record their started jobs through startedScript
// together: a worker whose batch finds no other recording under way
// records it at once, on its goroutine; the batches that come meanwhile
// wait in the node's queue, and startedLoop records all of them in one
// call. Under load the workers of a node then pay one script call for
// their starts instead of one each; a lone worker waits for nobody.
const (
	maxStartedPerCall = 256 // jobs per startedScript call (a worker's batch is never split)
	startedQueueSize  = 64
)

// startedCall is one worker's batch of started jobs waiting for
// startedScript, and then its outcomes; or, direct, a batch of handed
// jobs (worker_claim.go) whose dispatchers the worker answers itself.
type startedCall struct {
	w      *Worker
	refs   []startRef
	direct bool
	res    []any
	err    error
	done   chan struct{} // closed when res and err hold the outcome
}

// recordJobs runs startedScript for jobs whose Start succeeded and returns
// one outcome per job. An error leaves it unknown whether the script ran.
func (w *Worker) recordJobs(ctx context.Context, started []startRef) ([]any, error) {
	return w.sendStarted(ctx, started, false)
}

// answerHanded tells the dispatchers of handed jobs whose Start succeeded
// that it did, with a reply entry per dispatching node and no script:
// their records already say running. It returns "OK" per job; an error
// leaves it unknown whether the answers went.
func (w *Worker) answerHanded(ctx context.Context, started []startRef) ([]any, error) {
	return w.sendStarted(ctx, started, true)
}

// sendStarted records started jobs (recordJobs) or answers their
// dispatchers (answerHanded), with the other workers' batches of the node
// waiting meanwhile.
func (w *Worker) sendStarted(ctx context.Context, started []startRef, direct bool) ([]any, error) {
	n := w.node
	c := &startedCall{w: w, refs: started, direct: direct, done: make(chan struct{})}
	if n.recording.Add(1) == 1 {
		n.recordCalls(ctx, []*startedCall{c})
		n.recording.Add(-1)
		return c.res, c.err
	}
	select {
	case n.startedCalls <- c:
	case <-ctx.Done():
		n.recording.Add(-1)
		return nil, ctx.Err()
	}
	select {
	case <-c.done:
		return c.res, c.err
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}

// startedLoop records the batches waiting in n.startedCalls, as many as
// fit maxStartedPerCall in each call, until the node stops.
func (n *Node) startedLoop() {
	var held *startedCall // taken from the queue, for the next call
	for {
		batch := make([]*startedCall, 0, 8)
		if held != nil {
			batch, held = append(batch, held), nil
		} else {
			select {
			case <-n.ctx.Done():
				return
			case c := <-n.startedCalls:
				batch = append(batch, c)
			}
		}
		jobs := len(batch[0].refs)
	fill:
		for jobs < maxStartedPerCall {
			select {
			case c := <-n.startedCalls:
				if jobs+len(c.refs) > maxStartedPerCall {
					held = c
					break fill
				}
				batch, jobs = append(batch, c), jobs+len(c.refs)
			default:
				break fill
			}
		}
		ctx, cancel := context.WithTimeout(n.ctx, n.cfg.startTimeout())
		n.recordCalls(ctx, batch)
		cancel()
		n.recording.Add(-int64(len(batch)))
	}
}

// recordCalls runs startedScript for calls, in one call, answers the
// dispatchers of the direct ones in one pipeline, and stores each one's
// outcomes in it.
func (n *Node) recordCalls(ctx context.Context, calls []*startedCall) {
	defer func() {
		for _, c := range calls {
			close(c.done)
		}
	}()
	var direct, scripted []*startedCall
	for _, c := range calls {
		if c.direct {
			direct = append(direct, c)
		} else {
			scripted = append(scripted, c)
		}
	}
	if len(direct) > 0 {
		n.answerCalls(ctx, direct)
	}
	if len(scripted) > 0 {
		n.runStarted(ctx, scripted)
	}
}

// answerCalls answers the dispatchers of direct calls: one reply entry
// per dispatching node, whose topic is the request ids joined by commas
// (as startedScript writes them), in one pipeline.
func (n *Node) answerCalls(ctx context.Context, calls []*startedCall) {
	ids := map[string][]string{} // dispatching node → request ids
	var order []string
	for _, c := range calls {
		for _, s := range c.refs {
			if s.h.reqID == noReply || s.h.replyTo == noReply {
				continue
			}
			if _, ok := ids[s.h.replyTo]; !ok {
				order = append(order, s.h.replyTo)
			}
			ids[s.h.replyTo] = append(ids[s.h.replyTo], s.h.reqID)
		}
	}
	var err error
	lost := map[string]bool{} // dispatching nodes whose stream is gone
	if len(order) > 0 {
		cmds := make([]*redis.StringCmd, len(order))
		_, _ = n.rdb.Pipelined(ctx, func(p redis.Pipeliner) error { // errors are per command
			for i, to := range order {
				cmds[i] = p.XAdd(ctx, &redis.XAddArgs{
					Stream: n.lay.nprefix + to, NoMkStream: true,
					Values: []any{streamfields.Event, evReply, streamfields.Topic, strings.Join(ids[to], ","),
						streamfields.Payload, []byte{replyOK}},
				})
			}
			return nil
		})
		for i, to := range order {
			switch cerr := cmds[i].Err(); {
			case errors.Is(cerr, redis.Nil):
				lost[to] = true // NOMKSTREAM: the stream of a node the pool declared dead
			case cerr != nil && err == nil:
				err = cerr
			}
		}
	}
	for _, c := range calls {
		if err != nil {
			c.err = fmt.Errorf("pool: answering dispatchers: %w", err)
			continue
		}
		c.res = make([]any, len(c.refs))
		for i, s := range c.refs {
			c.res[i] = "OK"
			if lost[s.h.replyTo] {
				c.res[i] = answerLost
			}
		}
	}
}

// answerLost is answerHanded's outcome for a job whose dispatcher's
// stream is gone (the pool declared its node dead): its answer would be
// lost, so its start is recorded instead, which that node reads when it
// rejoins (resync).
const answerLost = "LOST"

// runStarted runs startedScript for calls, in one call, and stores each
// one's outcomes in it.
func (n *Node) runStarted(ctx context.Context, calls []*startedCall) {
	sk := newScriptKeys(append(n.lay.recordKeys(), n.lay.counters, n.lay.alive)...)
	var args []any
	for _, c := range calls {
		args = append(args, c.w.id, c.w.fence(), len(c.refs))
		for _, s := range c.refs {
			idx := 0
			if s.h.reqID != noReply && s.h.replyTo != noReply {
				idx = sk.add(n.replyStream(s.h.replyTo))
			}
			args = append(ref(args, s.key, s.h.nonce, s.h.gen), s.h.reqID, idx)
		}
	}
	res, err := n.run(ctx, startedScript, "started", sk.keys, args...)
	out, _ := res.([]any)
	for _, c := range calls {
		if err == nil && len(out) < len(c.refs)+2 {
			err = fmt.Errorf("pool: started: %d replies left for %d jobs", len(out), len(c.refs))
		}
		if err != nil {
			c.err = err
			continue
		}
		c.res, c.err = c.w.clockedReplies(out[:len(c.refs)+2], nil, len(c.refs), "started")
		out = out[len(c.refs)+2:]
	}
}
