package queue

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/shepherd-go/shepherd/internal/redisutil"
)

// Client reads and manages a queue without joining it: it registers no
// process and runs nothing in the background, which suits operators'
// tools. A Queue is a Client too. A Client is safe for concurrent use.
//
// On a queue of several shards (WithShards) a Client reads the shard
// count from Redis at its first call and keeps it; its readers (Stats,
// Tasks, DeadLetters, History...) read every shard and add up or merge,
// and its calls by id act in the shard that holds the task.
type Client struct {
	rdb  redis.UniversalClient
	name string
	lay  layout // the home shard's (shard 0): the whole queue's when it has one shard
	sh   shards // every shard's (shard.go)
}

// NewClient returns a Client of the queue called name on rdb. It checks
// its arguments only; see Exists.
func NewClient(rdb redis.UniversalClient, name string) (*Client, error) {
	if redisutil.IsNil(rdb) {
		return nil, invalid("nil Redis client")
	}
	lay, err := queueLayout(name)
	if err != nil {
		return nil, err
	}
	lay.spub = shardedPubSub(rdb)
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
//
// On a queue of n shards (WithShards) the shards' lists are merged:
// waiting tasks are listed untenanted ones first (shard by shard, each in
// the order it is taken), then each tenant's by tenant id, as on one
// shard (the shards take in turn, so no order is the order of taking
// across them); delayed and retrying ones by due time, active ones by id,
// dead letters by the time they died, done and cancelled ones by the
// time they finished (each shard keeps its own latest 10,000). Each
// shard is read up to offset+limit, so a deep page costs n times that.
func (q *Client) Tasks(ctx context.Context, state State, offset, limit int) ([]TaskInfo, error) {
	if offset < 0 || limit < 1 {
		return nil, invalid("tasks need offset >= 0 and limit >= 1, got %d and %d", offset, limit)
	}
	switch state {
	case StateWaiting, StateDelayed, StateRetrying, StateActive:
	case StateDead:
		return q.DeadLetters(ctx, offset, limit)
	case StateDone, StateCancelled:
		return q.finished(ctx, state, offset, limit)
	default:
		return nil, invalid("no list of tasks in state %q", state)
	}
	all, err := q.layouts(ctx)
	if err != nil {
		return nil, err
	}
	var ids []located
	switch state {
	case StateWaiting:
		ids, err = q.waiting(ctx, all, offset, limit)
	case StateDelayed:
		ids, err = q.byScore(ctx, all, func(l layout) string { return l.delayed }, offset, limit)
	case StateRetrying:
		ids, err = q.byScore(ctx, all, func(l layout) string { return l.retry }, offset, limit)
	case StateActive:
		ids, err = q.active(ctx, all, offset, limit)
	}
	if err != nil {
		return nil, fmt.Errorf("queue: tasks: %w", err)
	}
	return q.infos(ctx, ids, true)
}

// byScore lists the ids of the sorted set key of every shard, lowest
// score first (ties by shard, then as Redis orders them), skipping
// offset.
func (q *Client) byScore(ctx context.Context, all []layout, key func(layout) string, offset, limit int) ([]located, error) {
	if len(all) == 1 {
		ids, err := q.rdb.ZRange(ctx, key(all[0]), int64(offset), int64(offset+limit-1)).Result()
		return locate(all[0], ids), err
	}
	pipe := q.rdb.Pipeline()
	cmds := make([]*redis.ZSliceCmd, len(all))
	for i, l := range all {
		cmds[i] = pipe.ZRangeWithScores(ctx, key(l), 0, int64(offset+limit-1))
	}
	if _, err := pipe.Exec(ctx); err != nil {
		return nil, err
	}
	return mergeScored(all, cmds, false, offset, limit), nil
}

// mergeScored merges the shards' sorted members, each list in its
// order (descending when desc), by score, ties by shard, and returns the
// window [offset, offset+limit).
func mergeScored(all []layout, cmds []*redis.ZSliceCmd, desc bool, offset, limit int) []located {
	type scored struct {
		located
		score float64
		shard int
	}
	var merged []scored
	for i, c := range cmds {
		for _, z := range c.Val() {
			id, _ := z.Member.(string)
			merged = append(merged, scored{located{id, all[i]}, z.Score, i})
		}
	}
	sort.SliceStable(merged, func(i, j int) bool {
		a, b := merged[i], merged[j]
		if a.score != b.score {
			return (a.score < b.score) != desc
		}
		return a.shard < b.shard
	})
	var out []located
	for i := offset; i < len(merged) && i < offset+limit; i++ {
		out = append(out, merged[i].located)
	}
	return out
}

// active lists the ids of the tasks in flight, by id.
func (q *Client) active(ctx context.Context, all []layout, offset, limit int) ([]located, error) {
	pipe := q.rdb.Pipeline()
	cmds := make([]*redis.StringSliceCmd, len(all))
	for i, l := range all {
		cmds[i] = pipe.HKeys(ctx, l.active)
	}
	if _, err := pipe.Exec(ctx); err != nil {
		return nil, err
	}
	var ids []located
	for i, c := range cmds {
		ids = append(ids, locate(all[i], c.Val())...)
	}
	sort.SliceStable(ids, func(i, j int) bool { return ids[i].id < ids[j].id })
	if offset >= len(ids) {
		return nil, nil
	}
	return ids[offset:min(offset+limit, len(ids))], nil
}

// waiting lists waiting tasks: the untenanted ones (shard by shard), then
// each tenant's (by tenant id, in its shard), each in the order it is
// taken (by priority, then in order). Besides the tenants, it costs two
// round trips: the lists' lengths, then the parts it lists.
func (q *Client) waiting(ctx context.Context, all []layout, offset, limit int) ([]located, error) {
	tenants, err := q.tenantsOf(ctx, all)
	if err != nil {
		return nil, err
	}
	type list struct {
		lay layout
		key string
	}
	var lists []list
	add := func(l layout, ten string) {
		for p := MaxPriority; p >= 0; p-- {
			lists = append(lists, list{l, l.tenantReady(ten, p)})
		}
	}
	for _, l := range all {
		add(l, "")
	}
	for _, ten := range tenantIDs(tenants) {
		add(tenantLayout(all, ten), ten)
	}
	// The lists' lengths in one round trip, then the parts of those the
	// window covers in another.
	pipe := q.rdb.Pipeline()
	lens := make([]*redis.IntCmd, len(lists))
	for i, li := range lists {
		lens[i] = pipe.LLen(ctx, li.key)
	}
	if _, err := pipe.Exec(ctx); err != nil {
		return nil, err
	}
	pipe = q.rdb.Pipeline()
	type part struct {
		lay  layout
		cmds *redis.StringSliceCmd
	}
	var parts []part
	want := limit
	for i, li := range lists {
		n := lens[i].Val()
		if n == 0 {
			continue
		}
		if int64(offset) >= n {
			offset -= int(n)
			continue
		}
		// Taken from the right: the oldest is last.
		take := min(int64(want), n-int64(offset))
		parts = append(parts, part{li.lay, pipe.LRange(ctx, li.key, -int64(offset)-take, -int64(offset)-1)})
		offset = 0
		if want -= int(take); want == 0 {
			break
		}
	}
	if len(parts) == 0 {
		return nil, nil
	}
	if _, err := pipe.Exec(ctx); err != nil {
		return nil, err
	}
	var ids []located
	for _, p := range parts {
		v := p.cmds.Val()
		for i := len(v) - 1; i >= 0; i-- {
			ids = append(ids, located{v[i], p.lay})
		}
	}
	if len(ids) > limit { // a list grew between the two round trips
		ids = ids[:limit]
	}
	return ids, nil
}

// infos reads the tasks ids, each in its shard, in one pipeline; those
// gone meanwhile are left out. mayRun tells whether they may be running
// (listed as not finished): their attempts are read from active too
// (TaskInfo.running); finished ones and dead letters need not.
func (q *Client) infos(ctx context.Context, ids []located, mayRun bool) ([]TaskInfo, error) {
	if len(ids) == 0 {
		return nil, nil
	}
	pipe := q.rdb.Pipeline()
	cmds := make([]*taskRead, len(ids))
	runs := make([]*redis.StringCmd, len(ids))
	for i, t := range ids {
		cmds[i] = readTask(ctx, pipe, t.lay, t.id, taskFields...)
		if mayRun {
			runs[i] = pipe.HGet(ctx, t.lay.active, t.id)
		}
	}
	if _, err := pipe.Exec(ctx); err != nil && !errors.Is(err, redis.Nil) {
		return nil, fmt.Errorf("queue: tasks: %w", err)
	}
	out := make([]TaskInfo, 0, len(ids))
	for i, t := range ids {
		if info, ok := parseTask(t.id, cmds[i].Val()); ok {
			if mayRun {
				info.running(runs[i].Val())
			}
			out = append(out, info)
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

// finished lists finished tasks in state from the lists of the latest
// ones, newest first, skipping those whose outcome expired. On a queue of
// n shards each shard's first offset+limit are read and merged by the
// time they finished.
func (q *Client) finished(ctx context.Context, state State, offset, limit int) ([]TaskInfo, error) {
	all, err := q.layouts(ctx)
	if err != nil {
		return nil, err
	}
	if len(all) == 1 {
		return q.finishedIn(ctx, all[0], state, offset, limit)
	}
	var merged []TaskInfo
	for _, l := range all {
		part, err := q.finishedIn(ctx, l, state, 0, offset+limit)
		if err != nil {
			return nil, err
		}
		merged = append(merged, part...)
	}
	// Each shard's part is newest first: a stable sort keeps that order
	// among equal times.
	sort.SliceStable(merged, func(i, j int) bool { return merged[i].Finished.After(merged[j].Finished) })
	if offset >= len(merged) {
		return nil, nil
	}
	return merged[offset:min(offset+limit, len(merged))], nil
}

// finishedIn lists the finished tasks in state of the shard l.
func (q *Client) finishedIn(ctx context.Context, l layout, state State, offset, limit int) ([]TaskInfo, error) {
	const chunk = 500
	var out []TaskInfo
	seen := map[string]bool{} // an id used again is listed once
	for from := int64(0); from < maxFinishedListed && len(out) < limit; from += chunk {
		ids, err := q.rdb.LRange(ctx, l.finished, from, from+chunk-1).Result()
		if err != nil {
			return nil, fmt.Errorf("queue: tasks: %w", err)
		}
		infos, err := q.infos(ctx, locate(l, ids), false)
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
