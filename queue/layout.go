package queue

import (
	"strconv"

	"github.com/shepherd-go/shepherd/internal/keys"
)

// layout names every Redis key and channel of one queue, all under the
// queue's hash tag with kind "queue", so that a queue and a pool of the
// same name never share a key.
//
//	settings      hash: the queue-wide settings (settings.go)
//	ready         list: ids available now; new ones pushed on the left,
//	              taken from the right (FIFO), requeued ones on the right
//	delayed       zset: first attempts not due yet, by due time (ms)
//	retry         zset: later attempts not due yet, by due time (ms)
//	active        hash: id → its running attempt (wire.go, "Running
//	              attempts"), the tasks in flight
//	dead          zset: dead letters, by the time they died (ms, Redis's
//	              clock), raised to one above the newest letter's when
//	              not above it: strictly increasing, the order of death
//	              (the time shown is the task's fin field)
//	count         string: unfinished tasks, for MaxQueued (absent: 0)
//	deaddropped   string: dead letters dropped at MaxDeadLetters (kept
//	              with the queue, for Stats)
//	members       hash: process → when it last kept alive (ms, Redis's
//	              clock), internal/member's shape; lapsed after the TTL
//	procs         hash: process → its record (JSON)
//	withdrawn     zset: nonces of failed Submits withdrawn, by time (ms);
//	              expires withdrawnTTL after the last
//	idle          set: processes whose last take left workers idle (the
//	              ones a new task must wake)
//	tenants       hash: per tenant its capacity, load, unfinished
//	              tasks, rate and pause; the queue's rate and pause
//	              (fields in tenants.go)
//	ready:TENANT  list: a tenant's waiting tasks, as ready
//	ready/P, ready/P:TENANT  list: the waiting tasks of priority P (1 to
//	              MaxPriority; those of 0 are in ready and ready:TENANT)
//	rated         zset: tenants with waiting tasks over their rate, by
//	              when the rate allows their next start (ms)
//	dedup:KEY     string: the task holding a deduplication key
//	              (WithDedup), expiring with the window
//	tdelayed:TENANT, tretry:TENANT  zset: a tenant's part of delayed and
//	              retry ("" for untenanted tasks), kept by the same
//	              scripts, for Client.TenantTasks
//	finished      list: the ids of the latest finished tasks (done or
//	              cancelled; at most 10,000), newest first, for Tasks;
//	              expires with the longest-kept outcome listed
//	hist:STEP:AT  hash: the history bucket of STEP seconds (10 or 60)
//	              from AT (Unix s): counters, histogram bins and the
//	              sampled depth (history.go); expires after an hour or a
//	              day
//	turns         list: tenants with waiting tasks, in take's round-robin
//	              order ("" for untenanted tasks)
//	parked        set: tenants with waiting tasks found at capacity
//	holds         hash: Acquire token → "process\ntenant"
//	drains        hash: process → the serial of its server that Drain
//	              asked to drain, until the process applies it (or the
//	              server is gone)
//	janitor       string: the lease of the one process that reaps (member.Lease),
//	              expires unless renewed
//	batch:ID      hash: a batch's policy (pol), tasks (n), finished tasks
//	              (done) and first failed task (first)
//	btasks:ID     list: a batch's task ids, in submission order
//	tasks:XX      hash: id → the record of an unfinished task (its
//	              fields, wire.go, packed, then its payload: record.go),
//	              XX the id's last two characters (tasksOf)
//	task:ID       hash: a finished task, its outcome or dead letter
//	              (fields in wire.go); an unfinished one whose payload
//	              is over recordMaxPayload, or that an earlier version
//	              queued
//	inflight:PROC set: the ids a process runs
//	schedules     hash: schedule name → its version (schedule.go), absent
//	              while the queue has no schedule
//	schedule:NAME hash: a schedule: its definition, and its last tick
//	              (fields in schedule.go)
//	acked         string: written by a process that confirms what it read
//	              is replicated (WithReplicas: replica.Confirm); expires
//	              a minute after the last
//	chan:wake, chan:drain, chan:done:PROC, chan:cancel:PROC,
//	chan:schedules   pub/sub channels
type layout struct {
	settings, ready, delayed, retry, active, dead, count, deadDropped, alive, procs, withdrawn, idle string
	tenants, turns, parked, holds, drains, janitor                                                   string
	rated, dedupPrefix, histPrefix, finished, tasksPrefix                                            string
	schedules, schedulePrefix, acked                                                                 string

	taskPrefix, inflightPrefix, chanPrefix string

	shard int // which of the queue's shards (shard.go)
	// spub makes the scripts publish with SPUBLISH (sharded pub/sub) on
	// a Redis Cluster client (pubsub.go).
	spub bool
}

func newLayout(name string) (layout, error) {
	sp, err := keys.New(name)
	if err != nil {
		return layout{}, err
	}
	k := func(n string) string { return sp.Key(keys.KindQueue, n) }
	return layout{
		settings:       k("settings"),
		ready:          k("ready"),
		delayed:        k("delayed"),
		retry:          k("retry"),
		active:         k("active"),
		dead:           k("dead"),
		count:          k("count"),
		deadDropped:    k("deaddropped"),
		alive:          k("members"), // a zset of expiries named "alive" before the membership layer
		procs:          k("procs"),
		withdrawn:      k("withdrawn"),
		idle:           k("idle"),
		tenants:        k("tenants"),
		turns:          k("turns"),
		parked:         k("parked"),
		holds:          k("holds"),
		drains:         k("drains"),
		janitor:        k("janitor"),
		rated:          k("rated"), // the scripts build these from the task prefix (K_RATED, submitFn's P_DEDUP, hist:, finished)
		dedupPrefix:    k("dedup:"),
		histPrefix:     k("hist:"),
		finished:       k("finished"),
		tasksPrefix:    k("tasks:"), // the scripts build it from the task prefix (P_TASKS)
		schedules:      k("schedules"),
		schedulePrefix: k("schedule:"),
		acked:          k("acked"),
		taskPrefix:     k("task:"),
		inflightPrefix: k("inflight:"),
		chanPrefix:     k("chan:"),
	}, nil
}

func (l layout) task(id string) string { return l.taskPrefix + id }

// tasksOf is the key of the tasks hash that holds the record of the
// unfinished task id: the id's last two bytes name it (the scripts'
// recKey). Submit ends a random id with the time it was made, in windows
// of 100 ms (newTaskID), so the tasks submitted together share a hash,
// and a shard's backlog spreads over up to 1,024 of them: no one key
// grows too large to move between masters (a slot's keys move one by
// one). A caller's ids (WithTaskID) spread as their last two characters
// do.
func (l layout) tasksOf(id string) string { return l.tasksPrefix + id[max(0, len(id)-2):] }

// batch and batchTasks are built from taskPrefix, as the scripts build
// them (P_BATCH, P_BTASKS): the scripts get only the task prefix.
func (l layout) batch(id string) string {
	return l.taskPrefix[:len(l.taskPrefix)-len("task:")] + "batch:" + id
}
func (l layout) batchTasks(id string) string {
	return l.taskPrefix[:len(l.taskPrefix)-len("task:")] + "btasks:" + id
}

// tenantDelayed and tenantRetry are a tenant's ("" for none) delayed and
// retrying tasks by due time, as the scripts name them (P_TDELAYED,
// P_TRETRY): the part of delayed and retry that is the tenant's.
func (l layout) tenantDelayed(ten string) string {
	return l.taskPrefix[:len(l.taskPrefix)-len("task:")] + "tdelayed:" + ten
}
func (l layout) tenantRetry(ten string) string {
	return l.taskPrefix[:len(l.taskPrefix)-len("task:")] + "tretry:" + ten
}

// tenantReady is a tenant's list of waiting tasks of priority pri, as
// the scripts' readyKey names it.
func (l layout) tenantReady(ten string, pri int) string {
	k := l.ready
	if pri > 0 {
		k += "/" + strconv.Itoa(pri)
	}
	if ten == "" {
		return k
	}
	return k + ":" + ten
}
func (l layout) inflight(proc string) string { return l.inflightPrefix + proc }

// history is the history bucket of step seconds that starts at at (Unix
// seconds).
func (l layout) history(step, at int64) string {
	return l.histPrefix + strconv.FormatInt(step, 10) + ":" + strconv.FormatInt(at, 10)
}
func (l layout) wakeChannel() string         { return l.chanPrefix + "wake" }
func (l layout) drainChannel() string        { return l.chanPrefix + "drain" }
func (l layout) schedule(name string) string { return l.schedulePrefix + name }
func (l layout) schedulesChannel() string    { return l.chanPrefix + "schedules" }
func (l layout) doneChannel(proc string) string {
	return l.chanPrefix + "done:" + proc
}
func (l layout) cancelChannel(proc string) string {
	return l.chanPrefix + "cancel:" + proc
}

// common returns the keys every script takes first (KEYS[1] to KEYS[16])
// followed by extra, and the arguments every script takes first (ARGV[1]
// to ARGV[3]).
func (l layout) common(extra ...string) []string {
	k := make([]string, 0, 16+len(extra))
	k = append(k, l.settings, l.ready, l.delayed, l.retry, l.active, l.dead, l.count, l.deadDropped, l.alive, l.procs, l.withdrawn, l.idle,
		l.tenants, l.turns, l.parked, l.holds)
	return append(k, extra...)
}

func (l layout) commonArgs(args ...any) []any {
	a := make([]any, 0, 3+len(args))
	a = append(a, l.taskPrefix, l.inflightPrefix, l.pubChannel(l.chanPrefix))
	return append(a, args...)
}

// pubChannel is channel as a script that publishes to it takes it: with
// a "!" first when it publishes with SPUBLISH (the prelude's PUBLISH).
func (l layout) pubChannel(channel string) string {
	if l.spub {
		return "!" + channel
	}
	return channel
}
