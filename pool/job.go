package pool

import (
	"context"
	"time"
)

// Job is a job handed to a worker's Start handler.
type Job struct {
	// Key identifies the job in the pool; it runs on exactly one worker.
	Key string
	// Payload is the payload given to DispatchJob.
	Payload []byte
	// CreatedAt is when DispatchJob recorded the job (Redis server time).
	CreatedAt time.Time
	// Attempt counts the starts of this job, this one included: 1 for the
	// start DispatchJob waits for, more after the job was moved (rebalance,
	// a worker's death or close) or its start failed.
	Attempt int

	trace string // DispatchJob's span context (trace.go), "" when not traced
}

// JobHandler runs a worker's jobs. Start starts the long-running job and
// returns: it must not block for the job's lifetime. Stop stops it. A
// handler's methods may be called concurrently for different keys, never
// for the same key, even when one handler serves several workers of a
// node: Start and Stop of a key run one at a time across the node, and a
// Stop always ends the key's last successful Start on that node (a stale
// run a worker kept while frozen is stopped before a fresh Start of its
// key on another worker, and not again). A panic in a handler is
// recovered, logged and treated as an error.
type JobHandler interface {
	Start(ctx context.Context, job *Job) error
	Stop(ctx context.Context, key string) error
}

// NotificationHandler is implemented by a JobHandler that accepts
// NotifyWorker's payloads for its jobs.
type NotificationHandler interface {
	HandleNotification(ctx context.Context, key string, payload []byte) error
}
