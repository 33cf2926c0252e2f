package pool

import (
	"context"
	"strconv"
	"time"
)

// Concurrent DispatchJob calls are admitted in batches: a few admitter
// goroutines each take every admission waiting and run their scripts in
// one pipeline, so that 64 concurrent producers cost Redis and the node a
// handful of round trips instead of 64. A DispatchJob that finds no other
// admission under way runs its own at once, on its goroutine: batching
// costs a lone caller nothing.
const (
	admitters      = 4   // pipelines in flight at once
	maxAdmitBatch  = 128 // admissions per pipeline
	admitQueueSize = 1024
)

// admission is one DispatchJob waiting for admitRouteScript.
type admission struct {
	ctx  context.Context
	call scriptCall
	done chan struct{} // closed when call holds the outcome
}

// admit records a new job and either routes it to its worker or queues it
// for the routers (admitRouteScript), through the admitters. When ctx ends
// or the node closes first it returns that error; unless sent is false
// (the admission never left this node), the admission may still run, and
// the caller withdraws the job.
func (n *Node) admit(ctx context.Context, key, nonce string, payload []byte, reqID string) (res any, sent bool, err error) {
	t := n.table()
	w := t.owner(key)
	stream := n.lay.jobStream // a key of the pool; unused when no worker was chosen
	if w != "" {
		stream = n.lay.wprefix + w
	}
	a := &admission{ctx: ctx, done: make(chan struct{}), call: scriptCall{
		keys: []string{n.lay.jobs, n.lay.payloads, n.lay.jobStream, n.lay.shutdown, n.lay.workers, n.lay.slotsRev, stream, n.lay.withdrawn},
		args: []any{key, nonce, n.cfg.maxQueuedJobs, payload, n.id, reqID, w, strconv.FormatInt(t.rev, 10)},
	}}
	if n.admitting.Add(1) == 1 {
		// No other admission is under way: go out at once, on this
		// goroutine, without the hop to an admitter.
		a.call.res, a.call.err = n.run(ctx, admitRouteScript, "dispatch", a.call.keys, a.call.args...)
		n.admitting.Add(-1)
		close(a.done)
		return a.call.res, true, a.call.err
	}
	select {
	case n.admissions <- a:
	case <-ctx.Done():
		n.admitting.Add(-1)
		return nil, false, ctx.Err()
	case <-n.closedChan:
		n.admitting.Add(-1)
		return nil, false, n.errClosed()
	}
	select {
	case <-a.done:
		return a.call.res, true, a.call.err
	case <-ctx.Done():
		return nil, true, ctx.Err()
	case <-n.closedChan:
		return nil, true, n.errClosed()
	}
}

// admitLoop runs the admissions waiting in n.admissions, a batch per
// pipeline, until the node stops.
func (n *Node) admitLoop() {
	batch := make([]*admission, 0, maxAdmitBatch)
	calls := make([]*scriptCall, 0, maxAdmitBatch)
	for {
		batch, calls = batch[:0], calls[:0]
		select {
		case <-n.ctx.Done():
			return
		case a := <-n.admissions:
			batch = append(batch, a)
		}
	fill:
		for len(batch) < maxAdmitBatch {
			select {
			case a := <-n.admissions:
				batch = append(batch, a)
			default:
				break fill
			}
		}
		for _, a := range batch {
			if err := a.ctx.Err(); err != nil {
				a.call.err = err // its caller left: never admit it
				continue
			}
			calls = append(calls, &a.call)
		}
		if len(calls) > 0 {
			if n.admitHook != nil {
				n.admitHook(false)
			}
			ctx, cancel := context.WithTimeout(n.ctx, admitTimeout)
			n.runPipelined(ctx, admitRouteScript, "dispatch", calls)
			cancel()
			if n.admitHook != nil {
				n.admitHook(true)
			}
		}
		n.admitting.Add(-int64(len(batch)))
		for _, a := range batch {
			close(a.done)
		}
	}
}

// admitTimeout bounds one admission pipeline; callers wait no longer than
// their own ctx in any case.
const admitTimeout = 10 * time.Second
