package chaos

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/shepherd-go/shepherd/internal/keys"
	"github.com/shepherd-go/shepherd/internal/script"
)

// Kinds of log entries.
const (
	EvStart    = "start"    // a worker's Start succeeded (Proc, Worker, Key)
	EvStop     = "stop"     // a worker's Stop ran (Proc, Worker, Key)
	EvDispatch = "dispatch" // DispatchJob returned nil (Key)
	EvStopJob  = "stopjob"  // StopJob returned nil (Key)
	EvKill     = "kill"     // the harness SIGKILLed Proc
	EvFreeze   = "freeze"   // the harness SIGSTOPped Proc
	EvThaw     = "thaw"     // the harness SIGCONTed Proc
	EvExit     = "exit"     // Proc exited by itself (Close or Shutdown)
	EvUnknown  = "unknown"  // a DispatchJob or StopJob of Key failed: its outcome is unknown
	EvJoin     = "join"     // Proc's pool node joined with the id Key
	EvFault    = "fault"    // the harness began or ended a fault of Redis (Key: what), for the reader

	EvTaskStart = "tstart" // a queue handler began an attempt (Proc, Worker: the attempt, Key: the task id)
	EvTaskEnd   = "tend"   // a queue handler is about to return success (as EvTaskStart)
)

// Entry is one line of the log.
type Entry struct {
	Event  string `json:"e"`
	Proc   string `json:"p,omitempty"`
	Worker string `json:"w,omitempty"`
	Key    string `json:"k,omitempty"`
	// Ms is Redis TIME when the entry was appended, in ms.
	Ms int64 `json:"t"`
}

// Time returns the entry's Redis time.
func (e Entry) Time() time.Time { return time.UnixMilli(e.Ms) }

// appendScript appends an entry stamped with Redis's clock, so that every
// process's entries share one clock and one order.
//
//	KEYS[1] the log list
//	ARGV[1] event, ARGV[2] proc, ARGV[3] worker, ARGV[4] key
//
// Returns the log's new length.
var appendScript = redis.NewScript(`
local t = redis.call("TIME")
local ms = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
return redis.call("RPUSH", KEYS[1], cjson.encode({e = ARGV[1], p = ARGV[2], w = ARGV[3], k = ARGV[4], t = ms}))
`)

// Log is the suite's event log: a Redis list outside every pool's key
// space. A Log is safe for concurrent use.
type Log struct {
	rdb redis.UniversalClient
	key string
}

// LogKey returns the key of the log for tag; it shares no hash tag with
// the pool of the same name.
func LogKey(tag string) (string, error) {
	s, err := keys.New(tag + "-log")
	if err != nil {
		return "", err
	}
	return s.Key(keys.KindChaosLog, "events"), nil
}

// NewLog returns the log stored at key (see LogKey) on rdb.
func NewLog(rdb redis.UniversalClient, key string) *Log { return &Log{rdb: rdb, key: key} }

// Append appends one entry, once.
func (l *Log) Append(ctx context.Context, event, proc, worker, key string) error {
	_, err := script.Run(ctx, l.rdb, appendScript, "chaos: log", []string{l.key}, event, proc, worker, key)
	return err
}

// AppendRetry appends one entry, retrying every 50ms until it succeeds or
// ctx ends: records of what happened must survive short Redis outages.
func (l *Log) AppendRetry(ctx context.Context, event, proc, worker, key string) error {
	for {
		actx, cancel := context.WithTimeout(ctx, time.Second)
		err := l.Append(actx, event, proc, worker, key)
		cancel()
		if err == nil {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("chaos: log %s %s: %w", event, key, err)
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// Read returns every entry, in order.
func (l *Log) Read(ctx context.Context) ([]Entry, error) {
	raw, err := l.rdb.LRange(ctx, l.key, 0, -1).Result()
	if err != nil {
		return nil, fmt.Errorf("chaos: read log: %w", err)
	}
	out := make([]Entry, 0, len(raw))
	for _, s := range raw {
		var e Entry
		if err := json.Unmarshal([]byte(s), &e); err != nil {
			return nil, fmt.Errorf("chaos: malformed log entry %q: %w", s, err)
		}
		out = append(out, e)
	}
	return out, nil
}
