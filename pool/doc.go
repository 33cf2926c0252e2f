// Package pool runs distributed dedicated worker pools on Redis.
//
// Long-running jobs carry a key (a tenant id, a device id); every key runs
// on exactly one worker somewhere in the pool. Processes join a pool with
// AddNode, host workers with AddWorker, and dispatch, stop and notify jobs
// from any node:
//
//	node, err := pool.AddNode(ctx, rdb, "ingest")
//	w, err := node.AddWorker(ctx, handler) // handler: Start and Stop
//	err = node.DispatchJob(ctx, "tenant-42", payload)
//	err = node.NotifyWorker(ctx, "tenant-42", []byte("reload"))
//	err = node.StopJob(ctx, "tenant-42")
//	err = node.Close(ctx)    // leave; this node's jobs move elsewhere
//	err = node.Shutdown(ctx) // stop every job on every node, delete the pool
//
// Instead of dispatching keys by hand, a pool can run from a desired
// state: Node.Schedule asks a JobProducer for a plan every interval, on one
// node at a time, and starts and stops jobs to match. Node.NewTicker gives
// a cluster ticker, which ticks once per period on one node of the pool.
//
// A node with a stable identity (WithNodeID, WithRestartGrace) restarts
// without moving its jobs: Close stops them and keeps the node's place,
// and the process that comes back with the same id within the grace
// starts them again on the same workers; Leave takes it out for good.
//
// # How a job travels
//
// DispatchJob admits the job in one Redis script and routes it, by jump
// consistent hash over the pool's worker slots, to one worker, which calls
// Start and answers; DispatchJob returns Start's result. Stop and notify
// events reach the job's worker the same way. Workers keep alive every
// WorkerTTL/3; one janitor at a time declares the silent ones dead, by
// Redis's clock, and hands their jobs to other workers. docs/ARCHITECTURE.md
// in the repository follows a job through the code.
//
// # Guarantees
//
//   - No loss: once DispatchJob returned nil, the job runs somewhere until
//     StopJob or Shutdown, across worker and node crashes and Redis restarts
//     with appendfsync always. A DispatchJob that returned an error leaves
//     no running job (while its node lives; Close waits for withdrawals).
//   - No hostage: a process paused or cut off for longer than WorkerTTL
//     holds no job: what it ran or was about to receive runs elsewhere
//     within about WorkerTTL.
//   - One owner: a moving job is stopped on its old worker before it starts
//     on the new one; a frozen worker that comes back stops its stale
//     copies at once, and no write of its for them is accepted. That
//     window is the only double running (see JobHandler for what a
//     handler sees).
//   - Bounded queue, by rejection (ErrPoolFull); nothing is trimmed. With
//     WithDispatchLimit, DispatchJob calls wait for a permit of a limit
//     that backs off when the pool rejects or Redis slows.
//   - Minimal movement: a new worker takes about 1/(n+1) of the keys, all
//     onto it; a leaving worker (the oldest too) moves only its own. A
//     node with WithNodeID that restarts within its grace moves none.
//   - Every Redis key of pool P contains the hash tag {P}.
//
// WorkerTTL, PendingJobTTL and MaxQueuedJobs act pool-wide: the first full
// node stores them, and the others use them (see WithWorkerTTL).
//
// # Limits
//
// A worker handles its events one at a time: a slow Start delays its other
// events. A Start that does not return within PendingJobTTL is routed
// again; after 3 such attempts its DispatchJob fails with a *StartError.
// NotifyWorker and StopJob wait for the worker's answer until ctx ends or
// the worker leaves the pool. A full node keeps three connections of its
// client busy with blocking reads, plus three pub/sub connections.
//
// # Observability
//
// Stats (on a node) and Inspect (without joining) return a snapshot of the
// pool (Stats); Exists and LiveWorkers are cheap checks; InspectJob
// (Node.Job on a node) reports one job (JobInfo) in O(1). With
// WithMeterProvider a node reports OpenTelemetry metrics (the Metric*
// constants): alert when shepherd.pool.queue_depth_over_workers grows.
// WithLogger's records carry pool, node, worker and key attributes;
// WithTracerProvider traces dispatches and Starts.
package pool

// Reading the code: one file per step of a job's path, each script beside
// the code that runs it.
//
//	admit.go         DispatchJob, and the withdrawal of a failed dispatch
//	admission.go     admission, batched under load: the admission script
//	route.go         routers: the job stream to a worker's stream
//	table.go         the slot table: jump hash, slots taken and freed
//	worker.go        a worker and its loop
//	worker_start.go  a batch of start events: claim, Start, answer or record
//	worker_claim.go  jobs handed to a worker by their admission: when it may
//	                 start one without a claim (its clock) and answer alone
//	worker_record.go the claim and record scripts; a failed or stale Start
//	worker_stop.go   a stop event, a stop ended by a leaver
//	runs.go          every Start and Stop call, fenced by run on the node
//	worker_move.go   rebalance, hand-over (release), revival
//	worker_leave.go  RemoveWorker
//	request.go       StopJob, NotifyWorker: their scripts, sent to the owner
//	reply.go         answers: waiting calls, the reply loop, resync
//	keepalive.go     keep-alives, and rejoining after being declared dead
//	janitor.go       the janitor: its lease, dead workers and nodes
//	identity.go      WithNodeID: stable identities, their fence, Leave
//	restart.go       a stable worker parked by Close, and taking its
//	                 jobs back when its node returns
//	recover.go       recovery of dead workers' jobs and of stuck starts
//	replicas.go      WithReplicas (dispatches and stops confirmed on the
//	                 replicas), failover detection and its report
//	reconcile.go     after a failover: what the workers run against the
//	                 records
//	inbox.go         reading the workers' streams, trimming what was read
//	                 (in batches)
//	wire.go          the record (and the payload beside it), states,
//	                 events, header, reply codes and the Lua prelude
//	                 rendered from them
//	wire_compact.go  a running job's record in its compact form (Go)
//	lean.go          the scripts' text without the prelude's unused helpers
//	payload.go       payloads read from Go (they live in two places)
//	settings.go      pool-wide settings, node records
//	schedule*.go     schedules: a producer's plan, its fenced lease, the
//	                 diff that applies it, and their inspection
//	ticker.go        cluster tickers
//	close.go, shutdown.go, introspect.go, metrics.go, timeouts.go
//
// Design notes.
//
// Batching: under load a node admits every DispatchJob waiting at once in
// one script call (a lone call goes out alone, at once), a router routes what
// it read in one pipeline, a worker claims and records the starts waiting
// for it in one script call each (as many as take about 5 ms of its
// handler's average Start), and a leaving worker releases 128 jobs per
// call. A dispatch routed straight to its worker is handed to it, its
// record already saying running: the worker starts it without a claim
// while its event is fresh and answers its dispatcher without a script
// (worker_claim.go), so a dispatch costs one script call. A batch of
// starts answers each dispatching node in one reply entry, and the
// streams read without a group are trimmed every 100 entries.
//
// Liveness, not fixed graces, decides when a paused or cut-off process
// loses its work. Membership is one layer (internal/member): a node's
// keep-alive, its three outcomes (ok, revived, lost), the settings rule,
// the janitor's lease and the withdrawn ledger are the same for the queue. A frozen router's blocked XREADGROUP stays registered at
// Redis, which hands new entries to the client blocked longest: requeued
// jobs used to land in the frozen process's own pending list for the
// routers' 20 s ack grace. So recovered jobs go straight to their new
// worker's stream (the janitor picks the owner; a fenced script moves the
// job), and the job stream's sink takes over the pending events of every
// router whose node is not live (streaming.WithMembers: the routers are
// judged by the nodes' own keep-alives, one keep-alive per node), every
// quarter of WorkerTTL at most, deleting its consumer. A node that
// comes back finds its keep-alive gone, rejoins, and settles its waiting
// calls (whose answers went with its stream) from the job records.
//
// Failed calls: a DispatchJob's admission may reach Redis after the call
// gave up (it sat in a frozen Redis's socket buffer, or in the network).
// The withdrawal records the dispatch's nonce in the withdrawn hash, which
// the admission script checks, stops the job if it was admitted, and
// retries until Redis answers; the pool forgets nonces after ten minutes.
