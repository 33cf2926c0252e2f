package pool

import (
	"context"
	"fmt"
	"log/slog"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/shepherd-go/shepherd/internal/member"
)

// Shutdown stops the whole pool: every node stops its jobs (calling Stop)
// and its workers and closes. It waits for the nodes that kept alive
// within the last 3 WorkerTTLs (shutdownWaitTTLs), or until ctx ends, then
// deletes every Redis key of the pool (a node cut off for longer, and
// back later, may bring some back) and closes this node. It returns an
// error wrapping ctx's error when some nodes did not confirm in time (the
// keys are deleted all the same). AddNode fails with ErrPoolShutdown
// while it runs. It works on every kind of node and is idempotent.
func (n *Node) Shutdown(ctx context.Context) error {
	if err := n.errClosed(); err != nil {
		if err == ErrPoolShutdown {
			return nil
		}
		return err
	}
	// Shard 0 first: the nodes watch its flag, and stop all their parts.
	for _, p := range n.partsOrSelf() {
		if _, err := p.shutdown.Set(ctx, shutdownFlag, n.id); err != nil {
			return fmt.Errorf("pool: shutdown: %w", err)
		}
	}
	// Stop our own workers now rather than waiting for the flag's message.
	closeErr := n.stop(ctx, false)
	n.waitWatchers()
	waitErr := n.eachPart(func(p *Node) error { return p.awaitNodes(ctx) })

	delCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), shutdownDeleteTimeout)
	defer cancel()
	if err := n.eachPart(func(p *Node) error { return p.deleteKeys(delCtx) }); err != nil {
		return fmt.Errorf("pool: shutdown: delete keys: %w", err)
	}
	if waitErr != nil {
		return waitErr
	}
	return closeErr
}

// liveNodesScript lists the nodes whose keep-alive is within the TTL. A
// node that finished its shutdown deleted its keep-alive (HDEL, which
// never recreates a deleted hash).
//
//	KEYS[1] alive
//	ARGV[1] TTL in ms
var liveNodesScript = redis.NewScript(member.Lua + `
local now = now_ms()
local out = {}
local all = redis.call("HGETALL", KEYS[1])
for i = 1, #all, 2 do
  local f = all[i]
  if string.sub(f, 1, 2) == "n:" and not lapsed(all[i + 1], now, ARGV[1]) then
    out[#out + 1] = string.sub(f, 3)
  end
end
return out
`)

// awaitNodes waits until no live node is left that has not finished its
// shutdown.
func (n *Node) awaitNodes(ctx context.Context) error {
	t := time.NewTicker(50 * time.Millisecond)
	defer t.Stop()
	for {
		res, err := n.run(ctx, liveNodesScript, "live nodes", []string{n.lay.alive}, (shutdownWaitTTLs * n.cfg.workerTTL).Milliseconds())
		if err == nil {
			if left, _ := res.([]any); len(left) == 0 {
				return nil
			}
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("pool: shutdown: not every node confirmed: %w", ctx.Err())
		case <-t.C:
		}
	}
}

// deleteKeys deletes every key of the pool (and none of a queue of the
// same name).
func (n *Node) deleteKeys(ctx context.Context) error {
	_, err := unlinkPool(ctx, n.rdb, n.lay.space)
	return err
}

// shutdownWatch stops the node when another node shuts the pool down:
// every job stopped, workers removed, then its keep-alive deleted, which
// tells the shutting-down node that this one is done.
func (n *Node) shutdownWatch() {
	changes, cancel := n.shutdown.Subscribe()
	defer cancel()
	for {
		select {
		case <-n.ctx.Done():
			return
		case <-changes:
		}
		if _, ok := n.shutdown.Get(shutdownFlag); ok {
			n.logger.Info("pool shutting down")
			// This goroutine is no loop: stop does not wait for it, and
			// Close and Shutdown wait for it once stop has returned.
			n.stopForShutdown()
			return
		}
	}
}

func (n *Node) stopForShutdown() {
	ctx, cancel := context.WithTimeout(context.Background(), n.cfg.stopTimeout()+loopCallTimeout)
	defer cancel()
	if err := n.stop(ctx, false); err != nil {
		n.logger.Warn("shutdown of node", slog.Any("error", err))
	}
}
