package queue

import (
	"fmt"
	"strings"
)

// The wire contract between the queue's Go code and its Lua scripts.
//
// Every script takes the queue's common keys first (layout.common):
//
//	KEYS[1] settings, KEYS[2] ready, KEYS[3] delayed, KEYS[4] retry,
//	KEYS[5] active, KEYS[6] dead, KEYS[7] count, KEYS[8] deaddropped,
//	KEYS[9] alive, KEYS[10] procs, KEYS[11] withdrawn, KEYS[12] idle,
//	KEYS[13] tenants, KEYS[14] turns, KEYS[15] parked, KEYS[16] holds
//	ARGV[1] task key prefix, ARGV[2] inflight key prefix, ARGV[3] channel
//	prefix
//
// then its own, listed in its comment. A task's key is the prefix and its
// id, under the same hash tag, so the scripts that find ids in a list or
// set (dequeue, reap, purge) build it themselves.
//
// Every time comes from Redis TIME: one clock for due times and leases.

// A task's fields, declared once: those of an unfinished task's record
// (see "Records" below) and of a finished task's hash (layout.task). The
// Go code that reads a task names them by these constants, and the
// prelude binds each to a Lua local (taskHashFields), which the
// prelude's functions and take use. The scripts' own bodies name them by
// their value; the test TestScriptsUseOnlyTaskFields checks every field
// a script names on a task key or a record against this list. The names
// are stored in Redis: renaming one orphans that field of every task
// already queued.
const (
	fieldState       = "st"   // a State: waiting (also while it runs, see below; earlier versions wrote active), delayed, retry, done, dead or cancelled
	fieldPayload     = "p"    // the payload (after the map in a record, see "Records"); not kept by an outcome (emptied by earlier versions), kept by a dead letter
	fieldAttempts    = "att"  // attempts used, absent for 0; a running attempt is counted when it ends (see below)
	fieldMaxAttempts = "max"  // max attempts, absent for DefaultMaxAttempts
	fieldTimeout     = "to"   // per-attempt timeout (ms), absent for DefaultTimeout
	fieldSubmitter   = "sub"  // the submitting process, told the outcome; deleted then, kept by a dead letter
	fieldOwner       = "own"  // the process running it, written by versions before running attempts lived in active alone ("" when none)
	fieldRetention   = "ret"  // how long its outcome is kept (ms), absent for DefaultRetention
	fieldSubmitted   = "enq"  // submitted at (ms, Redis's clock, as every time below)
	fieldDue         = "due"  // due at, absent for its submission time
	fieldBegan       = "beg"  // its last attempt began at, written by versions before running attempts lived in active alone (now kept there only)
	fieldFinished    = "fin"  // finished at
	fieldErrors      = "errs" // the attempts' errors: JSON list of {a, e, t, s}, s the stack of the latest panic, on its attempt only
	fieldLastLater   = "lerr" // the last RetryLater error
	fieldResult      = "res"  // the result, absent when empty
	fieldCancel      = "cx"   // "1" once cancelled while running
	fieldTenant      = "ten"  // the tenant, absent for none
	fieldNonce       = "n"    // the nonce of the Submit that queued it (withdrawScript), absent when it is the id
	fieldBatch       = "b"    // its batch, absent for none
	fieldPriority    = "pri"  // its priority, absent for 0
	fieldDedupKey    = "dk"   // its deduplication key, absent for none
	fieldTrace       = "tc"   // its Submit's span context (WithTracerProvider), absent when not traced
	fieldProgress    = "pg"   // its handler's last progress: JSON {v, m, a, t} (progress.go)
	fieldPermanent   = "perm" // "1" on a dead letter whose last attempt failed with Permanent (or a result too large); absent otherwise, and on letters of earlier versions
)

// A field equal to its default is left out of a task (record or hash), and its
// readers (Lua and Go) take its absence for the default: attempts 0, max
// attempts DefaultMaxAttempts, timeout DefaultTimeout, retention
// DefaultRetention, due the submission time, tenant "", the nonce the
// task's id (a Submit with a random id uses the id as its nonce). The
// defaults are thus part of the stored shape: changing one changes what
// the tasks stored without the field mean. Tasks stored in full (by a
// version before this shape) read the same; a process of such a version
// fails on tasks stored without their default fields (its scripts take
// a missing field for a value), so an upgrade stops every old process
// before new ones submit.
const (
	defaultMaxField       = "25"       // DefaultMaxAttempts
	defaultTimeoutField   = "60000"    // DefaultTimeout, in ms
	defaultRetentionField = "86400000" // DefaultRetention, in ms
)

// Records. An unfinished task (waiting, delayed, retrying or running)
// whose payload is at most recordMaxPayload bytes is not a key of its
// own: it is a field of one of its shard's tasks hashes
// (layout.tasksOf), the task's id mapped to its record: its fields but
// the payload as one msgpack map of strings, then the payload's bytes
// (Redis's cmsgpack writes the map, decodeRecord reads it all), so that
// a script reads a task's fields without copying its payload
// (cmsgpack.unpack_one). A waiting task thus costs Redis a hash entry
// instead of a key, a key's object and a hash of its own: ~223 bytes
// instead of ~283 with a 64-byte payload (BENCHMARKS.md, "Records"). A
// script reads a record once a call (rec, recLoad: one HMGET a hash for
// a batch), changes it in Lua (recSet) and writes the changed ones in
// one HSET a hash before it returns (recSave). When the task finishes,
// its record leaves tasks and its fields, with the outcome's and without
// the payload and submitter (a dead letter keeps them), become the
// task's own hash, which expires with its retention. Replay makes a dead
// letter a record again. A change to a record (a retry's error, a
// progress report) rewrites it whole, its payload included.
//
// A task with a larger payload keeps a hash of its own (task:ID) while
// it is unfinished, as every task did before records: a record would
// copy its payload through Lua once more at the submit, the take and
// the end, and such a copy costs Redis ~1.4 µs a KiB there, while the
// ~60 bytes a record saves are little beside the payload. The scripts
// read it with recHash (every field but the payload) or recTake (what a
// take needs, with the payload), a success's end does not read it, and
// recSet writes its fields there at once. Tasks an earlier version
// queued are such hashes too, whatever their payload, and stay so: they
// run after an upgrade. The other way round is not safe: an old version
// does not see records (CHANGELOG.md, "Unreleased").

// Running attempts. A take does not write the task's record: the attempt
// lives in active alone, the task's id mapped to its process, attempt
// number, start (ms), and the fields its end needs, joined by newlines,
// the tenant last (it may hold one):
//
//	PROCESS \n ATTEMPT \n BEGAN \n SUBMITTER \n RETENTION \n BATCH \n TENANT
//
// (retention, batch and tenant "" for their defaults). So a running
// task's record says "waiting" with the attempts before this one, and its
// end fences on active (one read for a batch of ends) and writes the
// attempt's number into the hash with the outcome (its start is not
// kept). The scripts read it with inFlight (prelude_finish.go); Inspect and
// Tasks show it (TaskInfo.running). A version before this layout wrote the attempt
// into the task's hash (state "active", "own", "att", "beg") and only the
// process into active: inFlight still reads such a task, so that the
// new version reaps, cancels and gives back the tasks an old process
// left in flight.
const runningParts = 7

// taskHashFields binds each field of the task hash to the Lua local the
// prelude gives it.
var taskHashFields = []struct{ name, lua string }{
	{fieldState, "F_STATE"},
	{fieldPayload, "F_PAYLOAD"},
	{fieldAttempts, "F_ATTEMPTS"},
	{fieldMaxAttempts, "F_MAX_ATTEMPTS"},
	{fieldTimeout, "F_TIMEOUT"},
	{fieldSubmitter, "F_SUBMITTER"},
	{fieldOwner, "F_OWNER"},
	{fieldRetention, "F_RETENTION"},
	{fieldSubmitted, "F_SUBMITTED"},
	{fieldDue, "F_DUE"},
	{fieldBegan, "F_BEGAN"},
	{fieldFinished, "F_FINISHED"},
	{fieldErrors, "F_ERRORS"},
	{fieldLastLater, "F_LAST_LATER"},
	{fieldResult, "F_RESULT"},
	{fieldCancel, "F_CANCEL"},
	{fieldTenant, "F_TENANT"},
	{fieldNonce, "F_NONCE"},
	{fieldBatch, "F_BATCH"},
	{fieldPriority, "F_PRIORITY"},
	{fieldDedupKey, "F_DEDUP_KEY"},
	{fieldTrace, "F_TRACE"},
	{fieldProgress, "F_PROGRESS"},
	{fieldPermanent, "F_PERMANENT"},
}

// inlineFields writes the task hash's fields into the Lua of functions as
// their values ('st' for F_STATE): a function that names a field's
// local captures it, and every capture costs on every call (each
// function of a script is made anew; see docs/ARCHITECTURE.md, section
// 4). The scripts' own bodies keep the locals.
func inlineFields(lua string) string { return fieldInliner.Replace(lua) }

var fieldInliner = func() *strings.Replacer {
	var pairs []string
	for _, f := range taskHashFields {
		pairs = append(pairs, f.lua, "'"+f.name+"'")
	}
	return strings.NewReplacer(pairs...)
}()

// hashRead renders recHash's read of a task's own hash: an HMGET of every
// field but the payload (a payload of any size stays out of Lua), and
// the Lua list of their names in the same order.
func hashRead() (call, names string) {
	var locals, quoted []string
	for _, f := range taskHashFields {
		if f.name != fieldPayload {
			locals = append(locals, f.lua)
			quoted = append(quoted, "'"+f.name+"'")
		}
	}
	return "redis.call('HMGET', tk, " + strings.Join(locals, ", ") + ")", "{" + strings.Join(quoted, ", ") + "}"
}

// recordMaxPayload is the largest payload a record holds: a task with a
// larger one is a hash of its own (wire.go, "Records"), so that its
// payload is copied through Lua no more often than a record's would be
// (a 4 KiB copy costs Redis ~5 µs there).
const recordMaxPayload = 1024

// recordMaxPayloadText is recordMaxPayload as the scripts' text has it
// (TestFieldDefaults ties the two).
const recordMaxPayloadText = "1024"

// fieldLocals renders the prelude's lines that bind the task hash's
// fields to their Lua locals: "local F_STATE = 'st'", one a line.
func fieldLocals() string {
	var b strings.Builder
	for _, f := range taskHashFields {
		fmt.Fprintf(&b, "local %s = '%s'\n", f.lua, f.name)
	}
	return b.String()
}
