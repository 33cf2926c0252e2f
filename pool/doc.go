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
// # How a job travels
//
// DispatchJob checks admission and records the job in one Lua script: the
// key must be new, the queue below WithMaxQueuedJobs, the pool not shutting
// down. The same script appends a start event to the pool's job stream.
// Every full node reads that stream through one consumer group; the node
// that receives the event maps the key with jump consistent hash onto the
// table of worker slots and appends the event to that worker's own stream.
// (When the dispatching node's own copy of that table is current, the
// admission script does this routing itself and the job skips the job
// stream.)
// (Jobs queued again after a move or a recovery go straight to their new
// worker the same way when the node's table is current.)
// The worker claims the job, calls Start, records the outcome and answers
// the dispatching node on that node's stream; DispatchJob returns Start's
// result. Stop and notify events go from the caller straight to the stream
// of the job's current worker, which answers the caller the same way.
// (Answering the dispatcher directly, rather than through the routing node,
// saves a hop; the job record, not the routing node, is what recovery
// trusts.)
//
// Under load these steps go in batches: a node admits every DispatchJob
// waiting at that moment in one pipeline (a lone call goes out at once,
// alone), a router routes the events it read in one pipeline, and a worker
// claims the start events waiting for it in one script call, calls their
// Start handlers one by one, and records their outcomes (answering each
// dispatcher) in another; a leaving worker releases its jobs 128 per
// script call. A worker's batch holds as many starts as take
// about 5 ms at its handler's average Start duration, so a slow handler
// starts one job at a time and no dispatcher waits long for others.
//
// # Liveness: why a paused process holds nothing
//
// Every node keeps itself and its workers alive in Redis every
// WorkerTTL/3, stamped with Redis's clock. One janitor at a time (a short
// lease) looks every min(WorkerTTL/4, 250ms): workers and nodes whose
// keep-alive lapsed are declared dead and removed, and their jobs
// recovered. Three choices make a paused or cut-off process (a GC pause,
// SIGSTOP, a half-open TCP connection) give everything up within about
// WorkerTTL, not after some longer grace:
//
//   - Recovered jobs go straight to their new worker's stream (a scan
//     finds them, the janitor picks each owner from its slot table, and a
//     fenced script moves them), as moved jobs do, rather than through
//     the job stream. A frozen router's blocked XREADGROUP stays
//     registered at Redis, and Redis hands new entries to the client
//     blocked longest: the requeued jobs of a frozen process used to land
//     in that process's own pending list.
//   - What a dead node's router had read but not routed (events that
//     still go through the job stream: dispatches made while the
//     dispatcher's table was behind) is taken over by the janitor as soon
//     as the node is declared dead, and on every pass while it stays dead,
//     with the router's consumer deleted, instead of waiting for the
//     routers' acknowledgement grace (PendingJobTTL, 20s): liveness
//     decides, not a fixed period.
//   - A node that comes back after being declared dead finds its
//     keep-alive gone, rejoins, and settles its calls still waiting for
//     answers (lost with its stream) from the job records.
//
// The settings that act pool-wide (WorkerTTL, PendingJobTTL,
// MaxQueuedJobs) are stored with the pool by its first full node, so that
// the janitor, whichever node holds its lease, judges every process by the
// same TTL.
//
// # Failed calls
//
// A DispatchJob that returns an error (its ctx ended, Redis failed or did
// not answer) leaves no running job. Its admission may still reach Redis
// after the call gave up (it sat in a frozen Redis's socket buffer, or in
// the network), so the withdrawal records the dispatch's nonce as
// withdrawn, which the admission script checks, and stops the job if it
// was admitted; it retries until Redis answers, for as long as the node
// lives (Close waits for it). The pool forgets withdrawn nonces after ten
// minutes.
//
// # Guarantees
//
//   - No loss: once DispatchJob returned nil, the job runs somewhere until
//     StopJob or Shutdown, across worker crashes, node crashes and Redis
//     restarts with appendfsync always. The job record in Redis is the
//     authority: every start, move and stop is a generation-fenced script on
//     it, and recovery is derived from the records, never from a side index.
//   - One owner: each key runs on one worker. A job that moves is stopped on
//     its old worker before it is handed to the new one (rebalance, Close,
//     RemoveWorker). When a worker is declared dead (no keep-alive for
//     WorkerTTL, by Redis's clock), its jobs start elsewhere at once (see
//     Liveness); if the process was only frozen, it stops its stale copies as soon as it runs
//     again (its next keep-alive, at most WorkerTTL/3 later, or the slot
//     change it is told about), and no write of its for those jobs is
//     accepted. That revival window is the only double running.
//   - Bounded queue: at WithMaxQueuedJobs queued jobs, DispatchJob fails
//     with ErrPoolFull. Nothing is ever trimmed.
//   - Minimal movement: workers hold stable slots in a jump-hash table that
//     only grows (jumphash.HashLive). A new worker takes the lowest free
//     slot; only keys that now map to it move, all onto it. A leaving worker
//     (the oldest as well as the newest) frees its slot; only its own keys
//     move.
//   - Keys: every Redis key of pool P contains the hash tag {P}, so a pool
//     lives in one Redis Cluster slot and pools never share keys.
//
// # Limits
//
// A worker handles its events one at a time (starts that wait together
// are claimed and recorded in one batch, but still started one by one): a
// slow Start delays that worker's other events. A Start that takes longer
// than PendingJobTTL is considered stuck: the job is routed again and the
// slow start is stopped when it returns; after maxSlowStarts (3) such
// attempts the DispatchJob waiting for it fails with a *StartError that
// says so. NotifyWorker and StopJob wait for the worker's answer
// until ctx ends or the worker leaves the pool (dies, or is removed with
// the event unread): a stop is then answered once the job is deleted, a
// notification with ErrNoWorker. A full node keeps three connections of its client's pool
// busy with blocking reads (the job stream, all its workers' streams, its
// own stream; a client-only node one), plus one pub/sub connection per
// replicated map (three): size the client's pool accordingly.
//
// # Observability
//
// Stats (on a node) and Inspect (without joining) return a snapshot of a
// pool: nodes and their last keep-alive, workers with health, job count
// and key samples, queue depth, pending entries and the oldest one's age,
// and the jobs with no live owner, and the pool's settings. The shepherd
// command's status subcommand prints it. Exists (does Redis hold anything
// of a pool?) and LiveWorkers cost one call each, for checks before
// acting.
//
// Metrics: with WithMeterProvider, a node reports through OpenTelemetry
// (names in the Metric* constants): counters of jobs dispatched, started,
// start failures, stopped, requeued and moved, and of workers declared
// dead; histograms of DispatchJob and Start latency; gauges of the queue
// depth, the jobs running on the node, and
// shepherd.pool.queue_depth_over_workers: how long, in seconds, the queue
// has stayed at or above the number of workers. A healthy pool routinely
// drains its queue below its worker count; alert when this gauge grows
// (for instance above a minute). Without a provider, metrics are no-ops.
//
// Logs: WithLogger's *slog.Logger gets records with the pool, node,
// worker and key attributes; the default logger discards everything.
package pool
