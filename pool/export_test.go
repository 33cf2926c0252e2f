package pool

import (
	"context"
	"strconv"
)

// crash simulates the process dying: every loop stops and nothing is
// written to Redis (no Close, no keep-alive, no cleanup, no withdrawal).
func (n *Node) crash() {
	n.test.crashed.Store(true)
	n.mu.Lock()
	n.closed = true
	n.mu.Unlock()
	n.closeOnce.Do(func() {
		close(n.closedChan)
		n.loops.Stop()
		n.background.Stop()
		ctx := context.Background()
		if n.sink != nil {
			_ = n.sink.Close(ctx)
		}
		if n.inbox != nil {
			_ = n.inbox.Close(ctx)
		}
		_ = n.replies.Close(ctx)
		n.loops.Wait()
		n.background.Wait()
		n.watchers.Stop()
		n.watchers.Wait()
		_ = n.workers.Close()
		_ = n.slots.Close()
		_ = n.shutdown.Close()
		close(n.doneChan)
	})
}

// pauseKeepAlive stops (true) or resumes (false) the node's keep-alives.
func (n *Node) pauseKeepAlive(paused bool) { n.test.keepAlivePaused.Store(paused) }

// recordNonce reads the nonce out of a job record.
func recordNonce(raw string, nonce *string) (int, error) {
	r, err := parseRecord(raw)
	if err != nil {
		return 0, err
	}
	*nonce = r.Nonce
	return 1, nil
}

// RedisAddr is the address of the test Redis, for the examples.
func RedisAddr() string { return srv.Addr() }

// String builds a header as the scripts do (header in the prelude), for
// tests that forge events.
func (h header) String() string {
	return h.nonce + " " + strconv.FormatInt(h.gen, 10) + " " + h.replyTo + " " + h.reqID
}
