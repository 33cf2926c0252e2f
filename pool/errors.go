package pool

import (
	"errors"
	"fmt"

	"github.com/shepherd-go/shepherd/internal/redisutil"
)

// Sentinel errors. Callers branch on them with errors.Is.
var (
	// ErrJobExists: DispatchJob of a key that is already dispatched or
	// running.
	ErrJobExists = errors.New("pool: job already exists")
	// ErrJobNotFound: StopJob, NotifyWorker, InspectJob or Node.Job of a
	// key the pool does not run.
	ErrJobNotFound = errors.New("pool: job not found")
	// ErrPoolFull: DispatchJob while WithMaxQueuedJobs jobs wait to be
	// routed; nothing was queued, retry later.
	ErrPoolFull = errors.New("pool: queue full")
	// ErrNodeClosed: any call on a node after Close or Shutdown.
	ErrNodeClosed = errors.New("pool: node closed")
	// ErrPoolShutdown: the pool is shutting down or was shut down.
	ErrPoolShutdown = errors.New("pool: pool shut down")
	// ErrInvalidKey: an empty key, or one longer than MaxKeySize.
	ErrInvalidKey = errors.New("pool: invalid job key")
	// ErrInvalidOption: an invalid option value, a nil client or handler,
	// an invalid pool name, or AddWorker on a client-only node.
	ErrInvalidOption = errors.New("pool: invalid option")
	// ErrPayloadTooLarge: a job or notification payload larger than
	// WithMaxPayloadSize.
	ErrPayloadTooLarge = errors.New("pool: payload too large")
	// ErrUnknownWorker: RemoveWorker of a nil worker, or of a worker of
	// another node.
	ErrUnknownWorker = errors.New("pool: not a worker of this node")
	// ErrNoWorker: a notification could not be delivered because the job
	// has no live owner right now (it is being moved). Retry later.
	ErrNoWorker = errors.New("pool: job has no live worker")
	// ErrRedisTimeout: Redis did not answer DispatchJob's admission within
	// WithCallTimeout; not context.DeadlineExceeded, as ctx did not end.
	// The job is withdrawn (see DispatchJob).
	ErrRedisTimeout = errors.New("pool: redis did not answer in time")
	// ErrJobStopped: StopJob of the key ended DispatchJob's job before its
	// Start succeeded; it does not run.
	ErrJobStopped = errors.New("pool: job stopped before it started")
	// ErrNotReplicated: WithReplicas could not confirm DispatchJob's or
	// StopJob's outcome on enough replicas in time (see WithReplicas).
	ErrNotReplicated = errors.New("pool: not replicated")
	// ErrNodeIDInUse: AddNode with WithNodeID while a live node holds
	// that id; or, on a node whose id another process took over (it was
	// cut off past WorkerTTL), AddWorker.
	ErrNodeIDInUse = errors.New("pool: node id in use")
)

// StartError is returned by DispatchJob when the worker's Start handler
// failed (or panicked). The job is not recorded: dispatching the same key
// again is allowed.
type StartError struct {
	Key    string
	Worker string // the worker whose Start failed
	Msg    string // Start's error text, as it crossed Redis
}

func (e *StartError) Error() string {
	return fmt.Sprintf("pool: start of job %q failed on worker %s: %s", e.Key, e.Worker, e.Msg)
}

// isNoGroup reports a missing consumer group: a pool with no full node
// yet has no routers, which is no error for a snapshot.
func isNoGroup(err error) bool {
	return redisutil.HasErrorCode(err, "NOGROUP")
}
