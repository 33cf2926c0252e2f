package pool

import (
	"context"
	"strconv"
)

// admit records a new job and either routes it to its worker or queues it
// for the routers, in one script.
func (n *Node) admit(ctx context.Context, key, nonce string, payload []byte, reqID string) (any, error) {
	t := n.table()
	w := t.owner(key)
	stream := n.lay.jobStream // a key of the pool; unused when no worker was chosen
	if w != "" {
		stream = n.lay.wprefix + w
	}
	return n.run(ctx, admitRouteScript, "dispatch",
		[]string{n.lay.jobs, n.lay.payloads, n.lay.jobStream, n.lay.shutdown, n.lay.workers, n.lay.slotsRev, stream},
		key, nonce, n.cfg.maxQueuedJobs, payload, n.id, reqID,
		fieldArgs[0], fieldArgs[1], fieldArgs[2], w, strconv.FormatInt(t.rev, 10))
}
