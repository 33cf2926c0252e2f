package queue

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sort"
	"strconv"
	"time"

	"github.com/redis/go-redis/v9"
)

// Stats is a snapshot of a queue, read in one round trip (two when it has
// tenants).
type Stats struct {
	Available   int64 // waiting, due now (the depth the alarm watches)
	Delayed     int64 // first attempts not due yet
	Retrying    int64 // later attempts not due yet (backoff or RetryLater)
	InFlight    int64 // running now
	Dead        int64 // dead letters kept
	DeadDropped int64 // dead letters dropped at MaxDeadLetters, ever
	Workers     int64 // workers of the live processes
	Busy        int64 // of which running a task
	Paused      bool  // Pause: no task starts until Resume
	Rate        Rate  // SetRate; the zero Rate when none
	Tenants     []TenantInfo
	Processes   []ProcessInfo
}

// ProcessInfo describes one process of the queue.
type ProcessInfo struct {
	ID      string
	Host    string
	PID     int
	Started time.Time // the process's own clock
	Workers int       // 0: it only submits
	Busy    int       // as of its last keep-alive
	Limit   int       // its concurrency limit (WithConcurrencyLimit, WithLimit), 0 without one, as of its last keep-alive
	Part    string    // its partition of a shared Limit (WithLimit)
	Drops   int64     // its attempts that counted as drops for the limit, as of its last keep-alive
	Mode    string    // "serve" or "drain" (its Server's Mode), "" when it does not serve; sent at once when it changes
	// P50, P90 and P99 are the percentiles of its handlers' run times over
	// its last Sampled attempts (at most 512), as of its last keep-alive;
	// zero before its first attempt.
	P50, P90, P99 time.Duration
	Sampled       int
	LeaseFor      time.Duration
}

// Stats reads the queue's depth by state and its processes.
func (q *Client) Stats(ctx context.Context) (Stats, error) {
	pipe := q.rdb.Pipeline()
	available := pipe.LLen(ctx, q.lay.ready)
	delayed := pipe.ZCard(ctx, q.lay.delayed)
	retrying := pipe.ZCard(ctx, q.lay.retry)
	inflight := pipe.HLen(ctx, q.lay.active)
	dead := pipe.ZCard(ctx, q.lay.dead)
	dropped := pipe.Get(ctx, q.lay.deadDropped)
	procs := pipe.HGetAll(ctx, q.lay.procs)
	alive := pipe.HGetAll(ctx, q.lay.alive)
	settings := pipe.HMGet(ctx, q.lay.settings, settingTTL, "P", "r")
	now := pipe.Time(ctx)
	tenantHash := pipe.HGetAll(ctx, q.lay.tenants)
	if _, err := pipe.Exec(ctx); err != nil && !errors.Is(err, redis.Nil) {
		return Stats{}, fmt.Errorf("queue: stats: %w", err)
	}
	tenants, err := q.tenants(ctx, tenantHash.Val())
	if err != nil {
		return Stats{}, err
	}
	st := Stats{
		Available: available.Val(),
		Delayed:   delayed.Val(),
		Retrying:  retrying.Val(),
		InFlight:  inflight.Val(),
		Dead:      dead.Val(),
	}
	for _, t := range tenants {
		st.Available += t.Waiting
	}
	above, _ := strconv.ParseInt(tenantHash.Val()["q:"], 10, 64)
	st.Available += above
	sv := settings.Val()
	if len(sv) != 3 {
		sv = make([]any, 3)
	}
	st.Paused = sv[1] != nil
	st.Rate = parseRate(str(sv[2]))
	st.Tenants = tenants
	st.DeadDropped, _ = strconv.ParseInt(dropped.Val(), 10, 64)
	nowMs := now.Val().UnixMilli()
	ttlMs, _ := strconv.ParseInt(str(sv[0]), 10, 64)
	for id, raw := range alive.Val() {
		seen, _ := strconv.ParseInt(raw, 10, 64)
		lease := time.Duration(seen+ttlMs-nowMs) * time.Millisecond
		if lease < 0 {
			continue // about to be declared dead
		}
		var r procRecord
		_ = json.Unmarshal([]byte(procs.Val()[id]), &r)
		st.Processes = append(st.Processes, ProcessInfo{ID: id, Host: r.Host, PID: r.PID, Started: time.UnixMilli(r.Started),
			Workers: r.Workers, Busy: r.Busy, Limit: r.Limit, Part: r.Part, Drops: r.Drops, Mode: r.Mode, LeaseFor: lease,
			P50: time.Duration(r.P50) * time.Microsecond, P90: time.Duration(r.P90) * time.Microsecond, P99: time.Duration(r.P99) * time.Microsecond,
			Sampled: r.Sampled})
		st.Workers += int64(r.Workers)
		st.Busy += int64(r.Busy)
	}
	sort.Slice(st.Processes, func(i, j int) bool { return st.Processes[i].ID < st.Processes[j].ID })
	return st, nil
}
