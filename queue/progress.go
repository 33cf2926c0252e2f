package queue

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/shepherd-go/shepherd/internal/script"
)

// Progress is what a handler last reported of its task (Task.Progress).
type Progress struct {
	Value   float64   // the handler's number: a percentage, items done...
	Message string    // a short note, "" for none
	Attempt int       // the attempt that reported it
	At      time.Time // when Redis recorded it (Redis's clock)
}

// MaxProgressMessage bounds a progress message, in bytes.
const MaxProgressMessage = 1024

// ErrNotRunning is returned by Task.Progress when the attempt is no
// longer the task's running one (it timed out and was retried, was
// cancelled, or its process was declared dead): nothing was recorded.
var ErrNotRunning = errors.New("queue: attempt not running")

// Progress records the handler's progress on its task: a number (a
// percentage, the items done...) and a short message, which Inspect,
// Future.Progress, the CLI and the dashboard read from any process. Each
// call is one Redis call (in the task's shard), so report a few times a
// second at most. Only
// the running attempt records: a late one gets ErrNotRunning. The last
// report stays with the task (a retry's first report replaces it) until
// the task's outcome expires. Errors: ErrInvalidOption (NaN or infinite
// value, message over MaxProgressMessage), ErrNotRunning, ctx's, or
// Redis's.
func (t *Task) Progress(ctx context.Context, value float64, message string) error {
	if math.IsNaN(value) || math.IsInf(value, 0) {
		return invalid("progress must be a finite number, got %v", value)
	}
	if len(message) > MaxProgressMessage {
		return invalid("progress message must be at most %d bytes, got %d", MaxProgressMessage, len(message))
	}
	if t.report != nil {
		return t.report(ctx, value, message)
	}
	if t.q == nil {
		return fmt.Errorf("%w: task %s was not given by a Server", ErrNotRunning, t.ID)
	}
	q := t.q
	rec, err := json.Marshal(progressRecord{V: value, M: message, A: t.Attempt})
	if err != nil {
		return err
	}
	l := q.known()[t.shard] // the shard the task was taken from
	res, err := script.Run(ctx, q.rdb, progressScript, "queue: progress", l.common(l.task(t.ID)),
		l.commonArgs(q.proc, t.Attempt, string(rec))...)
	if err != nil {
		return err
	}
	if res != "OK" {
		return fmt.Errorf("%w: task %s, attempt %d", ErrNotRunning, t.ID, t.Attempt)
	}
	return nil
}

// progressRecord is the task's progress field: JSON {v, m, a, t}.
type progressRecord struct {
	V float64 `json:"v"`
	M string  `json:"m,omitempty"`
	A int     `json:"a"`
	T int64   `json:"t,omitempty"`
}

func parseProgress(s string) *Progress {
	if s == "" {
		return nil
	}
	var r progressRecord
	if json.Unmarshal([]byte(s), &r) != nil {
		return nil
	}
	return &Progress{Value: r.V, Message: r.M, Attempt: r.A, At: time.UnixMilli(r.T)}
}

// Progress reads what the task's handler last reported (Task.Progress);
// nil while it has reported nothing. ErrTaskNotFound when the task is
// no longer kept. It costs one read (on a queue of n shards, up to n for
// a caller's id: see Inspect).
func (f *Future) Progress(ctx context.Context) (*Progress, error) {
	if f.q == nil {
		return nil, fmt.Errorf("%w: %q", ErrTaskNotFound, f.id)
	}
	_, v, ok, err := f.q.findTask(ctx, f.q.known(), f.id, fieldState, fieldProgress)
	if err != nil {
		return nil, fmt.Errorf("queue: progress: %w", err)
	}
	if !ok {
		return nil, fmt.Errorf("%w: %q", ErrTaskNotFound, f.id)
	}
	s, _ := v[1].(string)
	return parseProgress(s), nil
}

// progressScript records an attempt's progress if it is the task's
// running attempt, owned by the process, with Redis's time.
//
//	KEYS[17] the task
//	ARGV[4] process, ARGV[5] attempt, ARGV[6] the record (JSON, no time)
//
// Returns "OK" or "STALE".
var progressScript = redis.NewScript(prelude + inFlightFn + `
local id = string.sub(KEYS[17], #P_TASK + 1)
local p, att = inFlight(id)
if p ~= ARGV[4] or att ~= ARGV[5] then return 'STALE' end
local pg = cjson.decode(ARGV[6])
pg.t = now()
recSet(id, F_PROGRESS, cjson.encode(pg))
recSave()
return 'OK'
`)
