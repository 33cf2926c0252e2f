package pool

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"time"

	"github.com/shepherd-go/shepherd/rmap"
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
		return fmt.Errorf("%w: payload of %d bytes exceeds MaxPayloadSize %d", ErrInvalidOption, len(payload), n.cfg.maxPayloadSize)
	}
	if _, ok := n.shutdown.Get(shutdownFlag); ok {
		return ErrPoolShutdown
	}
	return nil
}

// DispatchJob starts the job key with payload on one worker of the pool
// and returns once that worker's Start has returned. It returns nil when
// Start succeeded: from then on the job runs somewhere in the pool until
// StopJob or Shutdown, across worker and node failures. When Start fails
// it returns a *StartError and the job is not kept; so it does when Start
// did not return within PendingJobTTL on maxSlowStarts attempts.
//
// It returns ErrJobExists when key is already dispatched, ErrPoolFull
// when WithMaxQueuedJobs jobs wait to be routed, ErrInvalidKey or
// ErrInvalidOption (payload too large) for bad input, ErrNodeClosed or
// ErrPoolShutdown, and ErrJobStopped when the job ended before its Start
// succeeded (StopJob of the key meanwhile). While no worker exists, the
// job waits in the queue and DispatchJob waits with it.
//
// Any other error (ctx ended, Redis failed or did not answer) means the
// job does not run: DispatchJob withdraws whatever it may have admitted,
// in the background, retrying until Redis answers, and an admission that
// reaches Redis after the withdrawal (Redis was frozen, the network slow)
// is refused. The withdrawal lasts as long as the node: Close waits for
// it (up to Close's ctx). A process that exits without Close while a
// withdrawal waits for Redis may leave the job to run. Until the
// withdrawal is done, dispatching the same key again may find it
// (ErrJobExists).
func (n *Node) DispatchJob(ctx context.Context, key string, payload []byte) error {
	began := time.Now()
	if err := n.checkCall(key, payload); err != nil {
		return err
	}
	if err := ctx.Err(); err != nil {
		return err
	}
	nonce := newID()
	reqID, ch := n.await(opDispatch, key, nonce)
	res, sent, err := n.admit(ctx, key, nonce, payload, reqID)
	if err != nil {
		n.forget(reqID)
		if sent {
			n.withdrawLater(key, nonce) // the admission may run yet
		}
		return err
	}
	switch res {
	case "OK", "ROUTED":
		n.metrics.add(ctx, n.metrics.dispatched, 1)
	case "EXISTS":
		n.forget(reqID)
		return fmt.Errorf("%w: %q", ErrJobExists, key)
	case "FULL":
		n.forget(reqID)
		return ErrPoolFull
	case "SHUTDOWN":
		n.forget(reqID)
		return ErrPoolShutdown
	default: // "WITHDRAWN" cannot happen: the nonce is new
		n.forget(reqID)
		return fmt.Errorf("pool: dispatch of %q: unexpected reply %v", key, res)
	}
	select {
	case p := <-ch:
		return n.metrics.dispatchDone(ctx, began, replyError(key, p))
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

// background runs f on a goroutine that stop waits for, and reports false
// (running nothing) once the node is stopping.
func (n *Node) background(f func()) bool {
	n.bgMu.Lock()
	defer n.bgMu.Unlock()
	if n.bgClosed {
		return false
	}
	n.bg.Add(1)
	go func() {
		defer n.bg.Done()
		f()
	}()
	return true
}

// withdrawLater withdraws in the background: against a hung Redis the
// withdrawal lasts as long as Redis hangs, and the caller's deadline is
// over. A node that finished stopping tries once, at once.
func (n *Node) withdrawLater(key, nonce string) {
	if !n.background(func() { n.withdraw(n.bgCtx, key, nonce) }) {
		ctx, cancel := context.WithTimeout(context.Background(), withdrawTimeout)
		defer cancel()
		n.withdraw(ctx, key, nonce)
	}
}

// withdrawTimeout bounds one attempt of a withdrawal.
const withdrawTimeout = 5 * time.Second

// withdraw makes sure that the job of a failed DispatchJob does not run:
// it records the dispatch's nonce as withdrawn, so that its admission is
// refused if it reaches Redis later, and stops the job if it was admitted.
// It retries until Redis answers or ctx ends (Close gave up waiting).
func (n *Node) withdraw(ctx context.Context, key, nonce string) {
	wait := 50 * time.Millisecond
	for attempt := 1; ; attempt++ {
		actx, cancel := context.WithTimeout(ctx, withdrawTimeout)
		_, err := n.run(actx, stopScript, "withdraw", n.lay.stopKeys(),
			key, n.lay.wprefix, noReply, noReply, nonce, n.lay.nprefix)
		cancel()
		if err == nil {
			if attempt > 1 {
				n.logger.Info("withdrew a failed dispatch", slog.String("key", key), slog.Int("attempts", attempt))
			}
			return
		}
		if ctx.Err() != nil {
			n.logger.Error("withdrawing a failed dispatch was abandoned before Redis answered; the job may run",
				slog.String("key", key), slog.Any("error", err))
			return
		}
		if attempt == 1 {
			n.logger.Warn("withdrawing a failed dispatch: Redis did not answer; retrying until it does",
				slog.String("key", key), slog.Any("error", err))
		}
		t := time.NewTimer(wait)
		select {
		case <-t.C:
		case <-ctx.Done():
			t.Stop()
		}
		wait = min(2*wait, 2*time.Second)
	}
}

// replyError turns a worker's reply into DispatchJob's, StopJob's or
// NotifyWorker's error.
func replyError(key string, p []byte) error {
	if len(p) == 0 {
		return errors.New("pool: empty reply")
	}
	switch p[0] {
	case replyOK:
		return nil
	case replyStartFailed:
		worker, msg, _ := strings.Cut(string(p[1:]), "\n")
		return &StartError{Key: key, Worker: worker, Msg: msg}
	case replyNoJob:
		if len(p) > 1 {
			return fmt.Errorf("%w: %q: %s", ErrNoWorker, key, p[1:])
		}
		return fmt.Errorf("%w: %q", ErrNoWorker, key)
	case replyStopped:
		return fmt.Errorf("%w: %q: %s", ErrJobStopped, key, p[1:])
	default:
		return fmt.Errorf("pool: job %q: %s", key, p[1:])
	}
}

// StopJob stops the job key: its worker's Stop runs, and the job is
// deleted from the pool. It returns once Stop has returned (with Stop's
// error, the job being deleted anyway), or at once when the job was not
// running (queued, or its worker gone). It returns ErrJobNotFound for an
// unknown key. When ctx ends first, the stop still completes in the
// background.
func (n *Node) StopJob(ctx context.Context, key string) error {
	if err := n.checkCall(key, nil); err != nil {
		return err
	}
	return n.request(ctx, opStop, key, nil, map[any]error{
		"NOTFOUND": fmt.Errorf("%w: %q", ErrJobNotFound, key),
		"DELETED":  nil,
	})
}

// NotifyWorker delivers payload to the HandleNotification method of the
// worker running key and returns its error. It returns ErrJobNotFound for
// an unknown key, and ErrNoWorker while the job is not running (being
// started or moved): retry then. It also returns ErrNoWorker when the
// worker leaves the pool (or is declared dead) before answering; the
// notification may or may not have been handled then.
func (n *Node) NotifyWorker(ctx context.Context, key string, payload []byte) error {
	if err := n.checkCall(key, payload); err != nil {
		return err
	}
	return n.request(ctx, opNotify, key, payload, map[any]error{
		"NOTFOUND": fmt.Errorf("%w: %q", ErrJobNotFound, key),
		"NOWORKER": fmt.Errorf("%w: %q", ErrNoWorker, key),
	})
}

// request runs stopScript (op opStop) or notifyScript (opNotify), which either settles the
// call at once, with one of the replies in settled, or replies "SENT" (or
// {"SENT", worker}) after sending an event to the job's worker; then it
// waits for the worker's answer on this node's stream, or ctx. When the
// script names the worker and that worker leaves the pool before
// answering (it died, or left with the event unread), request returns
// ErrNoWorker instead of waiting for ctx. (A stop needs no such watch: the
// janitor or the leaving worker answers it.)
func (n *Node) request(ctx context.Context, op, key string, payload []byte, settled map[any]error) error {
	reqID, ch := n.await(op, key, "")
	var res any
	var err error
	if op == opStop {
		res, err = n.run(ctx, stopScript, op, n.lay.stopKeys(), key, n.lay.wprefix, n.id, reqID, "", n.lay.nprefix)
	} else {
		res, err = n.run(ctx, notifyScript, op, n.lay.recordKeys(), key, n.lay.wprefix, n.id, reqID, payload)
	}
	worker, sent := sentTo(res)
	if err == nil && !sent {
		var ok bool
		if err, ok = settled[res]; !ok {
			err = fmt.Errorf("pool: %s: unexpected reply %v", op, res)
		}
	}
	if err != nil || !sent {
		n.forget(reqID)
		return err
	}
	var left <-chan rmap.Event
	if worker != "" {
		events, cancel := n.workers.Subscribe()
		defer cancel()
		left = events
		if _, ok := n.workers.Get(worker); !ok {
			left = closedEvents
		}
	}
	for {
		select {
		case p := <-ch:
			return replyError(key, p)
		case e, ok := <-left:
			relevant := !ok || e.Kind == rmap.EventResync || (e.Kind == rmap.EventDelete && e.Key == worker)
			if !relevant {
				continue
			}
			if _, present := n.workers.Get(worker); present {
				if !ok {
					left = nil // the subscription ended: the node is closing
				}
				continue
			}
			select {
			case p := <-ch: // the answer came just before
				return replyError(key, p)
			default:
			}
			n.forget(reqID)
			return fmt.Errorf("%w: %q: its worker left the pool before answering", ErrNoWorker, key)
		case <-ctx.Done():
			n.forget(reqID)
			return ctx.Err()
		case <-n.closedChan:
			n.forget(reqID)
			return n.errClosed()
		}
	}
}

// closedEvents is a closed channel of map events: a receive from it
// reports at once that the watched worker is already gone.
var closedEvents = func() <-chan rmap.Event {
	c := make(chan rmap.Event)
	close(c)
	return c
}()

// sentTo reports whether a stop or notify script sent its event, and to
// which worker when it says.
func sentTo(res any) (worker string, sent bool) {
	switch v := res.(type) {
	case string:
		return "", v == "SENT"
	case []any:
		if len(v) == 2 && v[0] == "SENT" {
			worker, _ = v[1].(string)
			return worker, true
		}
	}
	return "", false
}
