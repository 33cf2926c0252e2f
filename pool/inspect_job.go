package pool

import (
	"context"
	"encoding/json"
	"fmt"
	"strconv"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/shepherd-go/shepherd/internal/script"
)

// JobState is a job's state as InspectJob reports it.
type JobState string

// Job states. A job goes queued or routed, starting, running, and
// stopping when StopJob asks; a job moved to another worker (rebalance,
// recovery) goes back to queued or routed, in a new generation.
const (
	JobQueued   JobState = "queued"   // waiting in the pool's job stream for a router
	JobRouted   JobState = "routed"   // waiting in its worker's stream
	JobStarting JobState = "starting" // claimed: its Start runs
	JobRunning  JobState = "running"  // Start succeeded, or the job was handed to its worker (its first Start may still run)
	JobStopping JobState = "stopping" // a stop is on its way to the worker
)

// jobStates maps record states to JobStates.
var jobStates = map[string]JobState{
	stateQueued:   JobQueued,
	stateRouted:   JobRouted,
	stateClaimed:  JobStarting,
	stateRunning:  JobRunning,
	stateStopping: JobStopping,
}

// JobInfo describes one job, as InspectJob reads it from Redis. Times are
// Redis's clock.
type JobInfo struct {
	Pool  string   `json:"pool"`
	Key   string   `json:"key"`
	State JobState `json:"state"`
	// Worker is the worker the job is routed to or runs on ("" while
	// queued); Node is its node ("" when the worker is no longer
	// registered: the janitor moves the job soon).
	Worker string `json:"worker,omitempty"`
	Node   string `json:"node,omitempty"`
	// WorkerHealthy tells whether the worker is registered and kept alive
	// within the pool's WorkerTTL, by Redis's clock.
	WorkerHealthy bool `json:"worker_healthy"`
	// Generation is bumped whenever the job is queued or routed again;
	// Attempt counts its claims (Start calls begun) so far.
	Generation int64 `json:"generation"`
	Attempt    int   `json:"attempt"`
	// Created is when DispatchJob created the job; Changed when its state
	// last changed (for a running job, when its Start succeeded).
	Created time.Time `json:"created"`
	Changed time.Time `json:"changed"`
	// Started is when the current run's Start succeeded: zero unless the
	// job is running, or stopping after it ran. For a job handed to its
	// worker by its admission (JobRunning), it is when the job was
	// created.
	Started time.Time `json:"started,omitempty"`
	// PayloadSize is len(Payload); Payload is the whole payload, which
	// callers truncate for display.
	PayloadSize int    `json:"payload_size"`
	Payload     []byte `json:"payload"`
	// LastError is the error text of the job's last failed Start (a Start
	// that fails after a move queues the job again), cut to 1024 bytes;
	// "" when none failed.
	LastError string `json:"last_error,omitempty"`
	// Time is Redis's clock when the job was read.
	Time time.Time `json:"time"`
}

// InspectJob returns the state of the job key of pool poolName without
// joining the pool: one script call that reads the job's record, payload
// and worker at once, O(1) whatever the pool's size. Health is judged by
// the WorkerTTL stored with the pool. It returns an error wrapping
// ErrJobNotFound when the pool has no job key (never dispatched, stopped,
// or its Start failed), ErrInvalidKey for an invalid key, and
// ErrInvalidOption for a nil client or an invalid pool name.
func InspectJob(ctx context.Context, rdb redis.UniversalClient, poolName, key string) (*JobInfo, error) {
	lay, err := poolLayout(rdb, poolName)
	if err != nil {
		return nil, err
	}
	if err := checkKey(key); err != nil {
		return nil, err
	}
	lays, err := shardLayouts(ctx, rdb, poolName, lay)
	if err != nil {
		return nil, fmt.Errorf("pool: inspect job %q of %q: %w", key, poolName, err)
	}
	return inspectJob(ctx, rdb, poolName, lays[shardOfKey(key, len(lays))], key)
}

// Job returns the state of the job key in the node's pool, as InspectJob
// does. It is safe for concurrent use.
func (n *Node) Job(ctx context.Context, key string) (*JobInfo, error) {
	if err := n.errClosed(); err != nil {
		return nil, err
	}
	if err := checkKey(key); err != nil {
		return nil, err
	}
	p := n.part(key)
	return inspectJob(ctx, n.rdb, n.name, p.lay, key)
}

func inspectJob(ctx context.Context, rdb redis.UniversalClient, poolName string, lay layout, key string) (*JobInfo, error) {
	op := fmt.Sprintf("pool: inspect job %q of %q", key, poolName)
	res, err := script.Run(ctx, rdb, inspectJobScript, op,
		[]string{lay.jobs, lay.payloads, lay.workers, lay.alive, lay.settings}, key)
	if err != nil {
		return nil, err
	}
	out, _ := res.([]any)
	if len(out) < 2 {
		return nil, fmt.Errorf("%s: unexpected reply %v", op, res)
	}
	str := func(i int) (string, bool) {
		if i >= len(out) {
			return "", false
		}
		s, ok := out[i].(string)
		return s, ok
	}
	sec, _ := out[0].(int64)
	usec, _ := out[1].(int64)
	now := time.Unix(sec, usec*int64(time.Microsecond))
	raw, ok := str(2)
	if !ok {
		return nil, fmt.Errorf("%s: %w", op, ErrJobNotFound)
	}
	payload, _ := str(3)
	ji, err := newJobInfo(poolName, key, now, raw, []byte(payload), len(payload), at(out, 4), at(out, 5), at(out, 6))
	if err != nil {
		return nil, fmt.Errorf("%s: %w", op, err)
	}
	return ji, nil
}

// at returns out[i], or nil past its end.
func at(out []any, i int) any {
	if i >= len(out) {
		return nil
	}
	return out[i]
}

// newJobInfo builds what InspectJob reports of the job key from what a
// script read of it at now: its jobs hash entry raw, its payload (nil
// when not read) and the payload's size, its worker's entry in the
// workers map, its worker's last keep-alive and the pool's stored
// WorkerTTL (each a string, or nil or false when missing).
func newJobInfo(poolName, key string, now time.Time, raw string, payload []byte, payloadSize int, info, seen, ttl any) (*JobInfo, error) {
	r, err := parseRecord(raw)
	if err != nil {
		return nil, fmt.Errorf("record: %w", err)
	}
	ji := &JobInfo{Pool: poolName, Key: key, State: jobStates[r.State], Worker: r.Worker,
		Generation: r.Gen, Attempt: r.Starts, Created: time.UnixMilli(r.Created),
		PayloadSize: payloadSize, Payload: payload, LastError: r.LastErr, Time: now}
	if ji.State == "" {
		ji.State = JobState(r.State) // a state newer than this code
	}
	if r.Started > 0 {
		ji.Started = time.UnixMilli(r.Started)
	}
	switch {
	case r.Changed > 0:
		ji.Changed = time.UnixMilli(r.Changed)
	case r.State == stateRunning:
		ji.Changed = ji.Started // zero for a record written before r.st existed
	}
	if info, ok := info.(string); ok {
		var wi workerInfo
		if err := json.Unmarshal([]byte(info), &wi); err != nil {
			return nil, fmt.Errorf("worker %s: %w", r.Worker, err)
		}
		ji.Node = wi.Node
		ttlPair := []any{}
		if ttl, ok := ttl.(string); ok {
			ttlPair = append(ttlPair, settingWorkerTTL, ttl)
		}
		set, err := parseSettings(ttlPair)
		if err != nil {
			return nil, err
		}
		if seen, ok := seen.(string); ok {
			ms, err := strconv.ParseInt(seen, 10, 64)
			ji.WorkerHealthy = err == nil && now.Sub(time.UnixMilli(ms)) <= set.workerTTL
		}
	}
	return ji, nil
}

// inspectJobScript reads what InspectJob reports of a job, at one instant:
// its record, its payload, its worker's registration and keep-alive. It
// changes nothing.
//
//	KEYS[1] jobs, KEYS[2] payloads, KEYS[3] workers map, KEYS[4] alive,
//	KEYS[5] settings
//	ARGV[1] the job's key
//
// Returns {seconds, microseconds} of Redis TIME, followed for a job that
// exists by its record, its payload, its worker's entry in the workers map
// and its last keep-alive (ms), and the pool's stored WorkerTTL (ms); each
// of the last three nil when missing.
var inspectJobScript = newScript(prelude + `
local t = redis.call("TIME")
local out = {tonumber(t[1]), tonumber(t[2])}
local raw = redis.call("HGET", KEYS[1], ARGV[1])
if not raw then return out end
local r, p = decrec(raw)
local info, seen = false, false
if r.w and r.w ~= "" then
  info = redis.call("HGET", KEYS[3], r.w)
  seen = redis.call("HGET", KEYS[4], "w:" .. r.w)
end
out[3] = raw
out[4] = p or redis.call("HGET", KEYS[2], ARGV[1]) or ""
out[5] = info
out[6] = seen
out[7] = redis.call("HGET", KEYS[5], "` + settingWorkerTTL + `")
return out
`)
