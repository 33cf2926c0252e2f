package queue

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"
)

// State is a task's state.
type State string

// A task's states.
const (
	StateWaiting   State = "waiting"   // available now
	StateDelayed   State = "delayed"   // first attempt not due yet
	StateRetrying  State = "retry"     // next attempt not due yet
	StateActive    State = "active"    // running
	StateDone      State = "done"      // succeeded
	StateDead      State = "dead"      // failed finally: a dead letter
	StateCancelled State = "cancelled" // cancelled
)

// TaskInfo describes a task.
type TaskInfo struct {
	ID          string
	State       State
	Tenant      string    // "" for none
	Priority    int       // 0 to MaxPriority (WithPriority)
	DedupKey    string    // its deduplication key (WithDedup), "" for none
	Progress    *Progress // what its handler last reported (Task.Progress), nil for nothing
	Payload     []byte    // kept until the task finishes; dead letters keep it
	Attempt     int       // attempts begun
	MaxAttempts int
	Timeout     time.Duration
	Process     string         // running it, when active
	Submitted   time.Time      // Redis's clock
	Due         time.Time      // when it is or was due
	Finished    time.Time      // zero until it finishes
	Errors      []AttemptError // failed attempts, oldest first
	LastLater   string         // the last RetryLater error
	Result      []byte
	// Permanent is true for a dead letter whose last attempt failed with
	// Permanent (or returned a result over MaxPayloadSize): it did not
	// use up its attempts. False for any other task, and for dead letters
	// recorded by versions before this field.
	Permanent bool
}

// taskFields are the task fields parseTask reads, in its order.
var taskFields = []string{fieldState, fieldPayload, fieldAttempts, fieldMaxAttempts, fieldTimeout, fieldOwner,
	fieldSubmitted, fieldDue, fieldFinished, fieldErrors, fieldLastLater, fieldResult, fieldTenant, fieldPriority, fieldDedupKey, fieldProgress, fieldPermanent}

func parseTask(id string, v []any) (TaskInfo, bool) {
	s := make([]string, len(v))
	for i, x := range v {
		s[i], _ = x.(string)
	}
	if s[0] == "" {
		return TaskInfo{}, false
	}
	num := func(x string) int64 { n, _ := strconv.ParseInt(x, 10, 64); return n }
	ms := func(x string) time.Time {
		if n := num(x); n > 0 {
			return time.UnixMilli(n)
		}
		return time.Time{}
	}
	// Absent fields are their defaults (wire.go).
	for i, d := range [...]string{3: defaultMaxField, 4: defaultTimeoutField, 7: s[6]} {
		if d != "" && v[i] == nil {
			s[i] = d
		}
	}
	t := TaskInfo{ID: id, State: State(s[0]), Attempt: int(num(s[2])), MaxAttempts: int(num(s[3])),
		Timeout: time.Duration(num(s[4])) * time.Millisecond, Process: s[5], Submitted: ms(s[6]), Due: ms(s[7]),
		Finished: ms(s[8]), Errors: parseAttempts(s[9]), LastLater: s[10], Tenant: s[12], Priority: int(num(s[13])), DedupKey: s[14], Progress: parseProgress(s[15]),
		Permanent: s[16] == "1"}
	if s[1] != "" {
		t.Payload = []byte(s[1])
	}
	if s[11] != "" {
		t.Result = []byte(s[11])
	}
	return t, true
}

// Inspect returns what the queue knows of the task id, or
// ErrTaskNotFound. On a queue of n shards an id this package made names
// its shard (one read); a caller's id (WithTaskID) is looked for in its
// own shard, then in the others (n reads).
func (q *Client) Inspect(ctx context.Context, id string) (TaskInfo, error) {
	if err := validID(id); err != nil {
		return TaskInfo{}, err
	}
	all, err := q.layouts(ctx)
	if err != nil {
		return TaskInfo{}, err
	}
	l, v, ok, err := q.findTask(ctx, all, id, taskFields...)
	if err != nil {
		return TaskInfo{}, fmt.Errorf("queue: inspect: %w", err)
	}
	t, parsed := parseTask(id, v)
	if !ok || !parsed {
		return TaskInfo{}, fmt.Errorf("%w: %q", ErrTaskNotFound, id)
	}
	if t.State == StateWaiting {
		run, err := q.rdb.HGet(ctx, l.active, id).Result()
		if err != nil && !errors.Is(err, redis.Nil) {
			return TaskInfo{}, fmt.Errorf("queue: inspect: %w", err)
		}
		t.running(run)
	}
	return t, nil
}

// running shows the attempt run, the task's value in active ("" for
// none), on t: a take leaves the task's hash as it was, "waiting", and
// keeps the running attempt in active alone (wire.go, "Running
// attempts"). A task an earlier version took says "active" in its hash.
func (t *TaskInfo) running(run string) {
	parts := strings.SplitN(run, "\n", runningParts)
	if t.State != StateWaiting || len(parts) != runningParts {
		return
	}
	t.State, t.Process = StateActive, parts[0]
	if n, err := strconv.Atoi(parts[1]); err == nil {
		t.Attempt = n
	}
}

func validID(id string) error {
	if id == "" || len(id) > MaxTaskIDSize {
		return invalid("task id must be 1 to %d bytes, got %d", MaxTaskIDSize, len(id))
	}
	return nil
}
