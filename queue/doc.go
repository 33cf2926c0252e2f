// Package queue is a common queue of short, independent operations (send
// this email, render this thumbnail, call this API) run by a limited set
// of workers, each dedicated to one resource instance (a connection, a
// browser, a core).
//
//	q, _ := queue.Open(ctx, rdb, "thumbnails")
//	q.Serve(render, queue.WithWorkers(4))     // in the serving processes
//	f, _ := q.Submit(ctx, payload)             // in any process
//	res, err := f.Wait(ctx)
//
// Submit returns once the task is durably queued, with a Future that
// completes exactly once: with the handler's result, or a *TaskError once
// the task failed finally (its attempts used up, or a Permanent error: it
// is then a dead letter, listed by DeadLetters and replayed by Replay) or
// was cancelled. Any process reads an outcome by task id with Result
// during its retention. Failed attempts are retried after an exponential
// backoff with jitter; RetryLater runs a task again later without using
// an attempt. Tasks may be delayed (WithDelay, WithDueAt).
//
// Tenants (SetTenant, WithTenant) get capped, fair shares: a tenant's
// tasks in flight (and Acquire slots) never exceed its capacity across
// the cluster, tenants with waiting tasks take turns, and an unregistered
// tenant is refused with nothing written. A Batch (NewBatch) is waited for
// as one, fail-fast or collect-all, from any process. A server serves
// until stopped or drains (WithMode, SetMode; Drain switches every
// serving process from outside): it stops by itself once nothing is left
// for it. The tasks a process runs at once can follow a
// limit learnt from the handlers' time (WithConcurrencyLimit), shared by
// several queues' servers in partitions with guaranteed shares (NewLimit,
// WithLimit); a task the limit does not allow stays in Redis.
//
// A tenant's tasks are taken by priority (WithPriority), tenants still
// taking turns. Rates (SetRate for the queue, SetTenantRate) cap task
// starts per period across the cluster, beside the capacities; a task over
// the rate waits in Redis. Pause and PauseTenant hold tasks until resumed,
// across restarts. WithDedup refuses duplicates for a window of their own:
// a duplicate gets the first task's future.
//
// # Periodic tasks
//
// A schedule (SetSchedule: a cron expression, a descriptor or "@every
// D", with its payload and task options) is stored with the queue, so
// any process adds, lists (Schedules) or removes one. Every serving
// process runs the scheduler, inside its Server; each tick is enqueued
// exactly once across the cluster, as a task of id "NAME@TIME" (TickOf;
// on a queue of many shards "2~NAME@TIME", the schedule's shard first:
// a schedule lives in the shard of its tenant, else of its name), by one
// Lua script that also advances the schedule's last tick, checks
// the schedule's version (a replaced definition's ticks are refused) and
// refuses a tick not yet due by Redis's clock. A tick not enqueued
// within 5s of its time is missed: skipped, or, with WithCatchUp(n), the
// n most recent missed ticks run once a process comes back.
// WithNoOverlap skips a tick while the previous task is unfinished.
//
// # Sharding
//
// A queue's keys share one hash tag, so on Redis Cluster it lives in one
// slot. WithShards(n) spreads it over n hash tags ("NAME", "NAME#1",
// ...): n copies of its key layout, each a shard; every script runs on
// one shard. A task's shard follows its tenant (caps, rates, fairness and
// pause stay exact per tenant), else its batch (a batch lives in one
// shard), else its deduplication key, else its caller's id (WithTaskID),
// else round the shards; the ids the queue makes carry their shard
// ("2~9f1c..."). Serving processes take from every shard in turn and are
// woken per shard; Stats and the listings add up over the shards. The
// queue-wide settings live in the home shard ("NAME"), copied to every
// shard; the queue's pause is in every shard, its rate and untenanted
// capacity split between them. The count is set when the queue is made;
// Client.Reshard changes it while the queue is idle. shard.go says where
// each thing lives. A shard's slot may move to another master of the
// cluster while the queue runs: its calls wait for the move (Redis
// refuses them meanwhile; no script runs with part of its keys moved),
// the other shards go on.
//
// # Guarantees
//
//   - At least once, one outcome. A task whose Submit returned nil runs
//     until it succeeds, fails finally or is cancelled, across handler
//     panics, killed and paused processes and Redis restarts with AOF
//     (without persistence a restart loses every task: the processes log
//     "queue state lost" at ERROR). Handlers must be idempotent: an
//     attempt cut off by a crash or a pause runs again. A late outcome
//     (from a process declared dead meanwhile) is refused, never recorded
//     over the real one.
//   - No hostage. A process that dies or stops answering (SIGSTOP, a GC
//     pause, a half-open connection) for longer than the queue's TTL is
//     declared dead by the others within TTL + 250ms, and its tasks in
//     flight run elsewhere; when it comes back it learns so, abandons them
//     and registers again. Nothing is routed to a process: each takes
//     tasks itself, so a paused one holds only what it was running (and
//     what it took ahead: see WithPrefetch).
//   - No dead time. Workers are woken by a pub/sub message when work
//     arrives, and sleep until the next due time of a delayed task; they
//     also look every second, in case a message was lost.
//   - Bounded by rejection. Submit beyond MaxQueued unfinished tasks fails
//     with ErrQueueFull; nothing is trimmed. Dead letters beyond
//     MaxDeadLetters drop the oldest, counted and logged.
//   - A failed call means what it says. A Submit that returns an error did
//     not queue its task, with one exception: Redis dying after it received
//     the Submit (see Submit).
//
// # How it works
//
// A task is a Redis hash; the ids of tasks available now are in a list,
// those not due yet in two sorted sets (delayed, retrying) by due time;
// every transition is one Lua script, with times from Redis TIME (one
// clock). Each process registers with a lease (keep-alives every TTL/3)
// and one goroutine that talks to Redis for its workers: in one script
// call it records a batch of attempts' ends (fenced by process and
// attempt) and takes as many due tasks as workers are idle (plus, while
// the queue has a backlog of short tasks, what its workers end in about
// 5 ms: see WithPrefetch), which marks them in flight on the process; the
// first idle worker starts each. Every
// process looks for processes whose lease ran out and gives their tasks
// back. Submits of a process are sent in batches, one script call each.
// The queue's keys are under its own hash tag ("shepherd:{NAME}:queue:…"),
// so a queue and a pool of the same name never share a key.
//
// Settings that act queue-wide (TTL, MaxQueued, MaxDeadLetters) are
// stored with the queue by its first process; see Open.
package queue

// Reading the code: one file per concept, each script beside the code
// that runs it. Every script starts with the prelude and takes the common
// keys first (wire.go).
//
//	queue.go           Queue: Open, the pub/sub listener, Close
//	pubsub.go          the process's subscriptions: classic, or sharded
//	                   on a Redis Cluster; renewed on the new master
//	replicas.go        WithReplicas (outcomes confirmed on the replicas),
//	                   failover detection and its report, the attempts a
//	                   failover took away
//	wire.go            the scripts' common KEYS and ARGV; the task hash's
//	                   fields, declared once
//	prelude.go         the Lua prelude: the keys, the fields' locals, and
//	                   the functions every script has (leaseOf, wake,
//	                   pushReady, unready...)
//	prelude_records.go the prelude's records of unfinished tasks (rec,
//	                   recLoad, recSet, recSave...)
//	prelude_finish.go  the Lua of the scripts that end tasks (finishFn:
//	                   finish, flush, cancelOne, unload...; inFlightFn)
//	layout.go          every key and channel name
//	shard.go           shards: where a task, a tenant, a setting lives
//	reshard.go         Client.Reshard
//	settings.go        queue-wide settings; registering (registerScript)
//	keepalive.go       keep-alives, the process record, abandoning the
//	                   attempts of a process declared dead
//	reap.go            declaring dead the processes whose lease ran out
//	giveback.go        tasks marked in flight here that nothing runs go
//	                   back: at Stop, at Close, and lost replies' orphans
//	submit.go          Submit, the shard a task goes to (placeTask)
//	submit_batch.go    the submitters and their batches (submitScript)
//	queuetask.go       the Lua queueTask (submitFn), which submitScript
//	                   and the tick script share
//	withdraw.go        taking back a failed Submit
//	future.go          Future: outcomes by message or by poll; Result
//	batch.go           Batch, WaitBatch
//	schedule.go        schedules: what one holds, Schedules
//	schedule_options.go  a schedule's options; CheckSchedule
//	schedule_edit.go   SetSchedule, RemoveSchedule, RunSchedule and their
//	                   scripts
//	schedule_spec.go   a spec's ticks (cron, intervals), missed ticks,
//	                   tick ids (TickOf)
//	scheduler.go       every server's scheduler and tickScript
//	server.go          Server: Serve, Stop, Halt
//	handler.go         Task, Handler, Resource; a worker's slot
//	testkit.go         the test kit's seam (internal/taskkit): a
//	                   handler run once, without Redis
//	mode.go            Mode, SetMode
//	worker.go          a worker: runs an attempt, classifies its end
//	feed.go            feed: the one goroutine that records ends and
//	                   takes tasks, in rounds; its state (feeder), wait
//	feed_round.go      a round's named steps: ends, permits, exchange...
//	feed_side.go       side calls: ends recorded apart, sick shards
//	feed_shards.go     which shard to take from, and when to look again
//	feed_ahead.go      how many to take, taking ahead, give-backs
//	take.go            taking tasks: take (Lua), dequeueScript
//	complete.go        recording ends and taking more: completeScript
//	panic.go           a handler's panic: one-line error, trimmed stack
//	timeout.go         a result returned after the attempt's deadline
//	limit.go           concurrency limits shared by servers (Limit)
//	tenants.go         tenants: the tenants hash, capacities, their scripts
//	acquire.go         Acquire, Slot, Middleware
//	cancel.go          Cancel, and cancelling a running attempt
//	dead.go            dead letters: list, delete, replay, purge, filing
//	drain.go           Client.Drain (drainScript)
//	client.go          Client, NewClient, Exists
//	tasks.go           Client.Tasks: listing tasks by state
//	inspect.go         TaskInfo, State, Client.Inspect
//	stats.go           Stats
//	metrics.go, durations.go  OpenTelemetry metrics; handler run times
//	options.go, submit_options.go, serve_options.go, calltimeout.go
//	errors.go, access.go  errors; ACLCommands, ClusterACLCommands
