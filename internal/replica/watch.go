package replica

import (
	"context"
	"fmt"
	"log/slog"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/shepherd-go/shepherd/internal/redisutil"
)

// State is what a server's INFO replication says of its history.
type State struct {
	Role    string // "master" or "slave"
	ID      string // master_replid: the history it follows now
	ID2     string // master_replid2: the history it followed before its promotion, or zeros
	Offset  int64  // master_repl_offset: bytes of history so far
	Offset2 int64  // second_repl_offset: ID2's history is valid up to Offset2-1; -1 when none
	// Replicas is connected_slaves: the replicas connected to a master.
	Replicas int
}

// ReadState reads c's INFO replication.
func ReadState(ctx context.Context, c redis.Cmdable) (State, error) {
	info, err := c.Info(ctx, "replication").Result()
	if err != nil {
		return State{}, err
	}
	return parseState(info)
}

func parseState(info string) (State, error) {
	var s State
	var err error
	for _, line := range strings.Split(info, "\n") {
		k, v, ok := strings.Cut(strings.TrimSpace(line), ":")
		if !ok {
			continue
		}
		switch k {
		case "role":
			s.Role = v
		case "master_replid":
			s.ID = v
		case "master_replid2":
			s.ID2 = v
		case "master_repl_offset":
			s.Offset, err = strconv.ParseInt(v, 10, 64)
		case "second_repl_offset":
			s.Offset2, err = strconv.ParseInt(v, 10, 64)
		case "connected_slaves":
			s.Replicas, err = strconv.Atoi(v)
		}
		if err != nil {
			return State{}, fmt.Errorf("INFO replication: %s: %w", k, err)
		}
	}
	if s.Role == "" || s.ID == "" {
		return State{}, fmt.Errorf("INFO replication: no role or master_replid in %q", info)
	}
	return s, nil
}

// Failover is a change of the master's replication id, as a Watcher saw
// it: the server now serving as master follows another history than the
// one it saw before.
type Failover struct {
	OldID, NewID string
	// Seen is the old history's offset when the watcher last read it:
	// what the old master had written, as far as this process knows (it
	// may have written more after that read).
	Seen int64
	// Kept is how far the new master's history follows the old one's
	// (second_repl_offset - 1), or -1 when it does not follow it at all:
	// a restart, or a replica that was not of this master.
	Kept int64
	// At is when the watcher noticed it.
	At time.Time
}

// Related tells whether the new master's history continues the old one.
func (f Failover) Related() bool { return f.Kept >= 0 }

// Lost returns how many bytes of the old master's history that the
// watcher saw the new master lacks (0 when it lacks none of them), and
// false when that is unknown (the histories are unrelated).
func (f Failover) Lost() (int64, bool) {
	if !f.Related() {
		return 0, false
	}
	return max(0, f.Seen-f.Kept), true
}

// Restart tells whether the change looks like a restart of a server
// that never had replicas: unrelated histories, and nothing replicated
// before (offset 0: Redis keeps no history without a replica).
func (f Failover) Restart() bool { return !f.Related() && f.Seen == 0 }

// Watcher reads the replication state of the master that serves a key
// and reports each change of its history. Poll may be called from one
// goroutine at a time.
type Watcher struct {
	rdb redis.UniversalClient
	key string

	mu   sync.Mutex
	last State
	have bool
}

// NewWatcher returns a Watcher of the master serving key (any key of a
// unit: on a Redis Cluster, its slot's master).
func NewWatcher(rdb redis.UniversalClient, key string) *Watcher {
	return &Watcher{rdb: rdb, key: key}
}

// Poll reads the state once and returns the failover it shows, if any.
// A read that reaches a replica (the client still talks to a demoted
// master) is not a history of a master: it is skipped. The first read
// sets the baseline.
func (w *Watcher) Poll(ctx context.Context) (*Failover, error) {
	c, err := Master(ctx, w.rdb, w.key)
	if err != nil {
		return nil, err
	}
	s, err := ReadState(ctx, c)
	if err != nil {
		return nil, err
	}
	if s.Role != "master" {
		return nil, nil
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	prev, had := w.last, w.have
	w.last, w.have = s, true
	if !had || s.ID == prev.ID {
		return nil, nil
	}
	f := &Failover{OldID: prev.ID, NewID: s.ID, Seen: prev.Offset, Kept: -1, At: time.Now()}
	if s.ID2 == prev.ID && s.Offset2 > 0 {
		f.Kept = s.Offset2 - 1
	}
	return f, nil
}

// Last returns the state of the last read, and false before any.
func (w *Watcher) Last() (State, bool) {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.last, w.have
}

// Report is how a unit logs f: the level (ERROR when writes were or may
// have been lost, WARN otherwise), the message and its attributes.
// lostTasks are what the unit knows it lost for it (futures, jobs): any
// makes it an ERROR.
func (f Failover) Report(what string, lostTasks int) (slog.Level, string, []any) {
	attrs := []any{slog.String("old_replid", f.OldID), slog.String("new_replid", f.NewID),
		slog.Int64("seen_offset", f.Seen), slog.Int64("kept_offset", f.Kept)}
	lost, known := f.Lost()
	switch {
	case f.Restart():
		return slog.LevelWarn, "Redis restarted (its replication id changed): writes its persistence did not keep are lost", attrs
	case !known:
		return slog.LevelError, "Redis failed over to a master whose history does not follow the old one's: " +
			"anything the old master acknowledged may be lost", attrs
	case lost > 0:
		return slog.LevelError, fmt.Sprintf("Redis failed over and lost writes: the new master lacks the last %d bytes "+
			"of the old master's history that this process saw (it may lack more)", lost), attrs
	case lostTasks > 0:
		return slog.LevelError, "Redis failed over and lost writes: " + what + " are gone", attrs
	}
	return slog.LevelWarn, "Redis failed over; the new master has every write this process saw", attrs
}

// Lossy tells whether f lost writes, or may have (a Report at ERROR
// without lostTasks).
func (f Failover) Lossy() bool {
	lost, known := f.Lost()
	return !known && !f.Restart() || lost > 0
}

// WatchEvery is how often Watch reads each master's replication state:
// an INFO replication costs Redis about 5 µs (INFO commandstats, a master
// with one replica).
const WatchEvery = 250 * time.Millisecond

// pollTimeout bounds each read of Watch: go-redis ends a call blocked on
// a socket at its ctx's deadline, not at its cancellation (a client built
// with ContextTimeoutEnabled), so a read sent to a Redis that froze
// mid-call would outlast the cancellation of Watch's ctx, and hold up the
// Close that waits for Watch, for as long as the freeze.
const pollTimeout = 2 * time.Second

// Watch reads the state of each of ws every WatchEvery until ctx ends.
// After each read it calls read(i, state) with the state of ws[i]'s
// master, and failedOver(i, f) when the read shows a failover; a read
// refused to the Redis user (NOPERM: an ACL without INFO) is passed to
// denied, once.
func Watch(ctx context.Context, ws []*Watcher, read func(i int, s State), failedOver func(i int, f Failover), denied func(error)) {
	t := time.NewTicker(WatchEvery)
	defer t.Stop()
	refused := false
	for {
		for i, w := range ws {
			pctx, cancel := context.WithTimeout(ctx, pollTimeout)
			f, err := w.Poll(pctx)
			cancel()
			if err != nil {
				if !refused && redisutil.HasErrorCode(err, "NOPERM") {
					refused = true
					denied(err)
				}
				continue
			}
			if s, ok := w.Last(); ok {
				read(i, s)
			}
			if f != nil {
				failedOver(i, *f)
			}
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}
