package pool

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/shepherd-go/shepherd/internal/member"
	"github.com/shepherd-go/shepherd/limit"
)

// checkKey validates a job key.
func checkKey(key string) error {
	if key == "" {
		return fmt.Errorf("%w: empty", ErrInvalidKey)
	}
	if len(key) > MaxKeySize {
		return fmt.Errorf("%w: %d bytes, the limit is %d", ErrInvalidKey, len(key), MaxKeySize)
	}
	return nil
}

func (n *Node) checkCall(key string, payload []byte) error {
	if err := n.errClosed(); err != nil {
		return err
	}
	if err := checkKey(key); err != nil {
		return err
	}
	if len(payload) > n.cfg.maxPayloadSize {
		return fmt.Errorf("%w: %d bytes, MaxPayloadSize is %d", ErrPayloadTooLarge, len(payload), n.cfg.maxPayloadSize)
	}
	if _, ok := n.shutdown.Get(shutdownFlag); ok {
		return ErrPoolShutdown
	}
	return nil
}

// DispatchJob starts the job key with payload on one worker of the pool
// and returns once that worker's Start has returned. It returns nil when
// Start succeeded: from then on the job runs somewhere in the pool until
// StopJob or Shutdown, across worker and node failures. While no worker
// exists, the job waits in the queue and DispatchJob with it.
//
// Errors: a *StartError when Start failed, or did not return within
// PendingJobTTL 3 times (maxSlowStarts); ErrJobExists, ErrPoolFull,
// ErrInvalidKey, ErrPayloadTooLarge, ErrNodeClosed, ErrPoolShutdown,
// ErrJobStopped; ctx.Err() when ctx ends first; ErrRedisTimeout when
// Redis did not answer the admission within WithCallTimeout.
//
// After any error the job does not run: DispatchJob withdraws what it may
// have admitted, in the background, retrying until Redis answers, and an
// admission that reaches Redis after the withdrawal (Redis was frozen,
// the network slow) is refused. The withdrawal lasts as long as the node
// (Close waits for it, up to Close's ctx): a process that exits without
// Close meanwhile may leave the job to run, and until it is done a
// DispatchJob of the same key may get ErrJobExists.
func (n *Node) DispatchJob(ctx context.Context, key string, payload []byte) error {
	ctx, span := n.startDispatch(ctx, key)
	err := n.part(key).dispatchJob(ctx, key, payload, fence{})
	endSpan(span, err)
	return err
}

// dispatchJob is DispatchJob; a schedule's planner passes its fence, so
// that its dispatches are refused once it lost its lease.
func (n *Node) dispatchJob(ctx context.Context, key string, payload []byte, f fence) error {
	began := time.Now()
	if err := n.checkCall(key, payload); err != nil {
		return err
	}
	if err := ctx.Err(); err != nil {
		return err
	}
	if err := n.tooFewReplicas(); err != nil {
		return err
	}
	p, err := n.dispatchPermit(ctx, key)
	if err != nil {
		return err
	}
	defer p.release()
	nonce := newID()
	reqID, ch := n.await(opDispatch, key, nonce)
	t0 := time.Now()
	res, sent, err := n.admit(ctx, key, nonce, payload, reqID, f)
	p.rtt = time.Since(t0)
	if err != nil {
		n.forget(reqID)
		if sent {
			n.withdrawLater(key, nonce) // the admission may run yet
		}
		// Redis failed, or is so slow that the call's deadline passed: a
		// drop. A caller that cancelled says nothing of the load.
		p.told, p.dropped = !errors.Is(ctx.Err(), context.Canceled), true
		return err
	}
	switch res {
	case "OK", "ROUTED":
		n.metrics.add(ctx, n.metrics.dispatched, 1)
		p.told = true
	case "EXISTS":
		n.forget(reqID)
		return fmt.Errorf("%w: %q", ErrJobExists, key)
	case "FULL":
		n.forget(reqID)
		p.told, p.dropped = true, true
		return ErrPoolFull
	case "SHUTDOWN":
		n.forget(reqID)
		return ErrPoolShutdown
	case "FENCED":
		n.forget(reqID)
		return errFenced
	default: // "WITHDRAWN" cannot happen: the nonce is new
		n.forget(reqID)
		return fmt.Errorf("pool: dispatch of %q: unexpected reply %v", key, res)
	}
	select {
	case p := <-ch:
		err := replyError(key, p)
		if err == nil {
			if err = n.confirmJob(ctx, "dispatch", key, nonce, true); err != nil {
				n.withdrawLater(key, nonce)
			}
		}
		return n.metrics.dispatchDone(ctx, began, err)
	case <-ctx.Done():
		n.forget(reqID)
		n.withdrawLater(key, nonce)
		return ctx.Err()
	case <-n.closedChan:
		n.forget(reqID)
		n.withdrawLater(key, nonce)
		return n.errClosed()
	}
}

// withdrawLater withdraws in the background: against a hung Redis the
// withdrawal lasts as long as Redis hangs, and the caller's deadline is
// over. A node that finished stopping tries once, at once.
func (n *Node) withdrawLater(key, nonce string) {
	if !n.background.Go(func() { n.withdraw(n.background.Context(), key, nonce) }) {
		ctx, cancel := context.WithTimeout(context.Background(), loopCallTimeout)
		defer cancel()
		n.withdraw(ctx, key, nonce)
	}
}

// withdraw makes sure that the job of a failed DispatchJob does not run:
// it records the dispatch's nonce as withdrawn, so that its admission is
// refused if it reaches Redis later, and stops the job if it was admitted
// (member.Withdraw: until Redis answers or ctx ends, Close gave up
// waiting).
func (n *Node) withdraw(ctx context.Context, key, nonce string) {
	tries, err := member.Withdraw(ctx, loopCallTimeout, func(ctx context.Context) error {
		_, _, err := n.sendRequest(ctx, opStop, key, nonce, noReply, noReply, nil, fence{})
		return err
	}, func(tries int, err error) {
		if tries == 1 {
			n.logger.Warn("withdrawing a failed dispatch: Redis did not answer; retrying until it does",
				slog.String("key", key), slog.Any("error", err))
		}
	})
	switch {
	case err != nil:
		n.logger.Error("withdrawing a failed dispatch was abandoned before Redis answered; the job may run",
			slog.String("key", key), slog.Any("error", err))
	case tries > 1:
		n.logger.Info("withdrew a failed dispatch", slog.String("key", key), slog.Int("attempts", tries))
	}
}

// permit is a DispatchJob's place within WithDispatchLimit: what its
// admission tells the limit, reported when the call returns.
type permit struct {
	tok     limit.Token // zero without a limit: its calls do nothing
	rtt     time.Duration
	told    bool // the admission says something about the load
	dropped bool
}

// dispatchPermit waits for a permit of WithDispatchLimit (none without).
func (n *Node) dispatchPermit(ctx context.Context, key string) (permit, error) {
	if n.dispatchLim == nil {
		return permit{}, nil
	}
	t, err := n.dispatchLim.Acquire(ctx)
	if errors.Is(err, limit.ErrLimitExceeded) {
		n.metrics.add(ctx, n.metrics.dispatchLimited, 1)
		return permit{}, fmt.Errorf("pool: dispatch of %q: no permit within %v (WithDispatchLimit, limit %d): %w",
			key, n.cfg.dispatchWait, n.dispatchLim.Limit(), err)
	}
	if err != nil {
		return permit{}, err
	}
	return permit{tok: t}, nil
}

func (p *permit) release() {
	if p.told {
		p.tok.Report(p.rtt, p.dropped)
	} else {
		p.tok.Ignore()
	}
}

// DispatchLimitStats is what DispatchLimit reports.
type DispatchLimitStats struct {
	Limit    int // concurrent DispatchJob calls allowed now
	InFlight int // calls holding a permit
	Waiting  int // calls waiting for one
}

// DispatchLimit reports the node's dispatch limit (WithDispatchLimit);
// all zero without one.
func (n *Node) DispatchLimit() DispatchLimitStats {
	if n.dispatchLim == nil {
		return DispatchLimitStats{}
	}
	return DispatchLimitStats{Limit: n.dispatchLim.Limit(), InFlight: n.dispatchLim.InFlight(), Waiting: n.dispatchLim.Waiting()}
}
