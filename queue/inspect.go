package queue

import (
	"context"
	"fmt"
	"sort"
	"strconv"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/shepherd-go/shepherd/internal/redisutil"
)

// Client reads and manages a queue without joining it: it registers no
// process and runs nothing in the background, which suits operators'
// tools. A Queue is a Client too. A Client is safe for concurrent use.
type Client struct {
	rdb  redis.UniversalClient
	name string
	lay  layout
}

// NewClient returns a Client of the queue called name on rdb. It checks
// its arguments only; see Exists.
func NewClient(rdb redis.UniversalClient, name string) (*Client, error) {
	if redisutil.IsNil(rdb) {
		return nil, invalid("nil Redis client")
	}
	lay, err := newLayout(name)
	if err != nil {
		return nil, invalid("queue name %q: %v", name, err)
	}
	return &Client{rdb: rdb, name: name, lay: lay}, nil
}

// Name returns the queue's name.
func (q *Client) Name() string { return q.name }

// Exists reports whether Redis holds the queue: a process opened it and
// Redis has not lost it since.
func (q *Client) Exists(ctx context.Context) (bool, error) {
	n, err := q.rdb.Exists(ctx, q.lay.settings).Result()
	if err != nil {
		return false, fmt.Errorf("queue: exists: %w", err)
	}
	return n == 1, nil
}

// Tasks lists up to limit tasks in state (StateWaiting, in the order they
// will be taken; StateDelayed and StateRetrying, soonest due first;
// StateActive; StateDead, newest first; StateDone and StateCancelled,
// newest first, among the latest 10,000 finished tasks whose outcome is
// still kept), skipping the first offset.
func (q *Client) Tasks(ctx context.Context, state State, offset, limit int) ([]TaskInfo, error) {
	if offset < 0 || limit < 1 {
		return nil, invalid("tasks need offset >= 0 and limit >= 1, got %d and %d", offset, limit)
	}
	var ids []string
	var err error
	switch state {
	case StateWaiting:
		ids, err = q.waiting(ctx, offset, limit)
	case StateDelayed:
		ids, err = q.rdb.ZRange(ctx, q.lay.delayed, int64(offset), int64(offset+limit-1)).Result()
	case StateRetrying:
		ids, err = q.rdb.ZRange(ctx, q.lay.retry, int64(offset), int64(offset+limit-1)).Result()
	case StateActive:
		var all []string
		all, err = q.rdb.HKeys(ctx, q.lay.active).Result()
		sort.Strings(all)
		if offset < len(all) {
			ids = all[offset:min(offset+limit, len(all))]
		}
	case StateDead:
		return q.DeadLetters(ctx, offset, limit)
	case StateDone, StateCancelled:
		return q.finished(ctx, state, offset, limit)
	default:
		return nil, invalid("no list of tasks in state %q", state)
	}
	if err != nil {
		return nil, fmt.Errorf("queue: tasks: %w", err)
	}
	return q.infos(ctx, ids)
}

// waiting lists waiting tasks: the untenanted ones, then each tenant's
// (by tenant id), each in the order it is taken (by priority, then in
// order).
func (q *Client) waiting(ctx context.Context, offset, limit int) ([]string, error) {
	tenants, err := q.Tenants(ctx)
	if err != nil {
		return nil, err
	}
	var lists []string
	for _, ten := range append([]string{""}, tenantIDs(tenants)...) {
		for p := MaxPriority; p >= 0; p-- {
			lists = append(lists, q.lay.tenantReady(ten, p))
		}
	}
	var ids []string
	for _, key := range lists {
		n, err := q.rdb.LLen(ctx, key).Result()
		if err != nil {
			return nil, err
		}
		if int64(offset) >= n {
			offset -= int(n)
			continue
		}
		// Taken from the right: the oldest is last.
		part, err := q.rdb.LRange(ctx, key, -int64(offset)-int64(limit-len(ids)), -int64(offset)-1).Result()
		if err != nil {
			return nil, err
		}
		for i := len(part) - 1; i >= 0; i-- {
			ids = append(ids, part[i])
		}
		offset = 0
		if len(ids) >= limit {
			break
		}
	}
	return ids, nil
}

func (q *Client) infos(ctx context.Context, ids []string) ([]TaskInfo, error) {
	if len(ids) == 0 {
		return nil, nil
	}
	pipe := q.rdb.Pipeline()
	cmds := make([]*redis.SliceCmd, len(ids))
	for i, id := range ids {
		cmds[i] = pipe.HMGet(ctx, q.lay.task(id), taskFields...)
	}
	if _, err := pipe.Exec(ctx); err != nil {
		return nil, fmt.Errorf("queue: tasks: %w", err)
	}
	out := make([]TaskInfo, 0, len(ids))
	for i, id := range ids {
		if t, ok := parseTask(id, cmds[i].Val()); ok {
			out = append(out, t)
		}
	}
	return out, nil
}

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
}

// taskFields are the task fields parseTask reads, in its order.
var taskFields = []string{fieldState, fieldPayload, fieldAttempts, fieldMaxAttempts, fieldTimeout, fieldOwner,
	fieldSubmitted, fieldDue, fieldFinished, fieldErrors, fieldLastLater, fieldResult, fieldTenant, fieldPriority, fieldDedupKey, fieldProgress}

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
		Finished: ms(s[8]), Errors: parseAttempts(s[9]), LastLater: s[10], Tenant: s[12], Priority: int(num(s[13])), DedupKey: s[14], Progress: parseProgress(s[15])}
	if s[1] != "" {
		t.Payload = []byte(s[1])
	}
	if s[11] != "" {
		t.Result = []byte(s[11])
	}
	return t, true
}

// Inspect returns what the queue knows of the task id, or
// ErrTaskNotFound.
func (q *Client) Inspect(ctx context.Context, id string) (TaskInfo, error) {
	if err := validID(id); err != nil {
		return TaskInfo{}, err
	}
	v, err := q.rdb.HMGet(ctx, q.lay.task(id), taskFields...).Result()
	if err != nil {
		return TaskInfo{}, fmt.Errorf("queue: inspect: %w", err)
	}
	t, ok := parseTask(id, v)
	if !ok {
		return TaskInfo{}, fmt.Errorf("%w: %q", ErrTaskNotFound, id)
	}
	return t, nil
}

func validID(id string) error {
	if id == "" || len(id) > MaxTaskIDSize {
		return invalid("task id must be 1 to %d bytes, got %d", MaxTaskIDSize, len(id))
	}
	return nil
}

func tenantIDs(ts []TenantInfo) []string {
	ids := make([]string, len(ts))
	for i, t := range ts {
		ids[i] = t.ID
	}
	return ids
}

// maxFinishedListed bounds the list of the latest finished tasks (done
// or cancelled) that Tasks reads: finish pushes, flush trims.
const maxFinishedListed = 10_000

// finished lists finished tasks in state from the list of the latest
// ones, newest first, skipping those whose outcome expired.
func (q *Client) finished(ctx context.Context, state State, offset, limit int) ([]TaskInfo, error) {
	const chunk = 500
	var out []TaskInfo
	seen := map[string]bool{} // an id used again is listed once
	for from := int64(0); from < maxFinishedListed && len(out) < limit; from += chunk {
		ids, err := q.rdb.LRange(ctx, q.lay.finished, from, from+chunk-1).Result()
		if err != nil {
			return nil, fmt.Errorf("queue: tasks: %w", err)
		}
		infos, err := q.infos(ctx, ids)
		if err != nil {
			return nil, err
		}
		for _, t := range infos {
			if t.State != state || seen[t.ID] {
				continue
			}
			seen[t.ID] = true
			if offset > 0 {
				offset--
				continue
			}
			if len(out) < limit {
				out = append(out, t)
			}
		}
		if len(ids) < chunk {
			break
		}
	}
	return out, nil
}
