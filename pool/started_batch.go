package pool

import (
	"context"
	"fmt"
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
// startedScript, and then its outcomes.
type startedCall struct {
	w    *Worker
	refs []startRef
	res  []any
	err  error
	done chan struct{} // closed when res and err hold the outcome
}

// recordJobs runs startedScript for jobs whose Start succeeded and returns
// one outcome per job. An error leaves it unknown whether the script ran.
func (w *Worker) recordJobs(ctx context.Context, started []startRef) ([]any, error) {
	n := w.node
	c := &startedCall{w: w, refs: started, done: make(chan struct{})}
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

// recordCalls runs startedScript for calls, in one call, and stores each
// one's outcomes in it.
func (n *Node) recordCalls(ctx context.Context, calls []*startedCall) {
	defer func() {
		for _, c := range calls {
			close(c.done)
		}
	}()
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
