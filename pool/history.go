package pool

import (
	"context"
	"fmt"
	"log/slog"
	"strconv"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/shepherd-go/shepherd/internal/member"
)

// The pool's recent past, kept in Redis so that any reader (the
// dashboard, several of them) sees the same history, from before it
// started: the node holding the janitor lease samples the pool every
// HistoryStep into a list (layout.history) that keeps HistorySpan of
// samples and expires HistorySpan after the last one. A sample is one
// script call of a few O(1) reads (XLEN, XPENDING's summary, HLEN,
// HMGET) and an LPUSH and LTRIM: one call a pool every 10 s, about 60
// bytes a sample, at most 360 of them (~22 KB).
const (
	HistoryStep = 10 * time.Second
	HistorySpan = time.Hour
)

// historyKeep is how many samples the list keeps.
const historyKeep = int(HistorySpan / HistoryStep)

// HistoryPoint is one sample of a pool's history.
type HistoryPoint struct {
	At time.Time // when it was sampled, Redis's clock
	// Jobs counts the pool's jobs; Queued the entries of its job stream
	// (read or not) and Pending those read by a router and not yet
	// acknowledged; Workers the registered workers. As Stats has them.
	Jobs, Queued, Pending, Workers int64
	// Started, StartsFailed and Recovered are the pool's counters (as
	// Stats has them) when sampled: they only grow, until Shutdown, so
	// the difference between two samples is what happened between them.
	Started, StartsFailed, Recovered int64
}

// History returns the pool's samples of the last n*HistoryStep (n at
// most HistorySpan/HistoryStep), oldest first: one a HistoryStep while a
// full node ran, none for the time no node did. A pool without history
// (new, or no full node for an hour) returns none. It reads one key.
func History(ctx context.Context, rdb redis.UniversalClient, poolName string, n int) ([]HistoryPoint, error) {
	lay, err := poolLayout(rdb, poolName)
	if err != nil {
		return nil, err
	}
	if n < 1 || n > historyKeep {
		return nil, fmt.Errorf("%w: history of %d samples: want 1 to %d", ErrInvalidOption, n, historyKeep)
	}
	lays, err := shardLayouts(ctx, rdb, poolName, lay)
	if err != nil {
		return nil, fmt.Errorf("pool: history of %q: %w", poolName, err)
	}
	var out []HistoryPoint
	for i, l := range lays {
		points, err := shardHistory(ctx, rdb, l, n)
		if err != nil {
			return nil, fmt.Errorf("pool: history of %q: %w", poolName, err)
		}
		if i == 0 {
			out = points
		} else {
			addHistory(out, points)
		}
	}
	return out, nil
}

// shardHistory returns one shard's samples of the last n steps, oldest
// first.
func shardHistory(ctx context.Context, rdb redis.UniversalClient, lay layout, n int) ([]HistoryPoint, error) {
	pipe := rdb.Pipeline()
	tc := pipe.Time(ctx)
	lc := pipe.LRange(ctx, lay.history, 0, int64(n-1))
	if _, err := pipe.Exec(ctx); err != nil {
		return nil, err
	}
	since := tc.Val().Add(-time.Duration(n) * HistoryStep)
	raw := lc.Val()
	out := make([]HistoryPoint, 0, len(raw))
	for i := len(raw) - 1; i >= 0; i-- { // stored newest first
		p, err := parseHistoryPoint(raw[i])
		if err != nil {
			return nil, err
		}
		if p.At.After(since) {
			out = append(out, p)
		}
	}
	return out, nil
}

// addHistory adds another shard's samples to shard 0's, step by step
// (each shard's janitor samples once a HistoryStep): the jobs, the stream
// and the counters add up; the workers, in every shard, do not. A step
// shard 0 did not sample is left out.
func addHistory(into, from []HistoryPoint) {
	step := func(t time.Time) int64 { return t.UnixMilli() / HistoryStep.Milliseconds() }
	at := make(map[int64]int, len(into))
	for i, p := range into {
		at[step(p.At)] = i
	}
	for _, p := range from {
		if i, ok := at[step(p.At)]; ok {
			q := &into[i]
			q.Jobs += p.Jobs
			q.Queued += p.Queued
			q.Pending += p.Pending
			q.Started += p.Started
			q.StartsFailed += p.StartsFailed
			q.Recovered += p.Recovered
		}
	}
}

// historyFields is a sample's layout in the list: space-separated
// integers in this order, the first Redis's clock in ms.
const historyFields = 8

func parseHistoryPoint(s string) (HistoryPoint, error) {
	f := strings.Fields(s)
	if len(f) < historyFields {
		return HistoryPoint{}, fmt.Errorf("sample %q: want %d fields", s, historyFields)
	}
	var v [historyFields]int64
	for i := range v {
		x, err := strconv.ParseInt(f[i], 10, 64)
		if err != nil {
			return HistoryPoint{}, fmt.Errorf("sample %q: %w", s, err)
		}
		v[i] = x
	}
	return HistoryPoint{At: time.UnixMilli(v[0]), Jobs: v[1], Queued: v[2], Pending: v[3], Workers: v[4],
		Started: v[5], StartsFailed: v[6], Recovered: v[7]}, nil
}

// sampleHistory adds a sample to the pool's history, unless one was
// taken in this HistoryStep already (two janitors at once, or a pass
// soon after the last). It only logs a failure: the history is for
// operators.
func (n *Node) sampleHistory(ctx context.Context) {
	_, err := n.run(ctx, historyScript, "history",
		[]string{n.lay.settings, n.lay.shutdown, n.lay.history, n.lay.jobs, n.lay.jobStream, n.lay.workers, n.lay.counters},
		HistoryStep.Milliseconds(), historyKeep, HistorySpan.Milliseconds())
	if err != nil && n.ctx.Err() == nil {
		n.logger.Warn("sampling the history failed (the pool's charts miss this sample)", slog.Any("error", err))
	}
}

// historyScript samples the pool into its history list, newest first,
// at most one sample a step (by Redis's clock), and keeps keep of them.
// Like the recoveries, it writes nothing while the pool shuts down or
// once its settings are gone.
//
//	KEYS[1] settings, KEYS[2] shutdown map, KEYS[3] history, KEYS[4]
//	jobs, KEYS[5] job stream, KEYS[6] workers map, KEYS[7] counters
//	ARGV[1] step (ms), ARGV[2] samples kept, ARGV[3] the list's TTL (ms)
//
// Returns 1 if sampled, else 0.
var historyScript = redis.NewScript(member.Lua + fmt.Sprintf(`
if redis.call("EXISTS", KEYS[1]) == 0 or redis.call("HEXISTS", KEYS[2], %q) == 1 then return 0 end
local now = now_ms()
local step = tonumber(ARGV[1])
local last = redis.call("LINDEX", KEYS[3], 0)
if last then
  local t = tonumber(string.match(last, "^%%d+"))
  if t and math.floor(t / step) == math.floor(now / step) then return 0 end
end
local pending = 0
local ok, p = pcall(redis.call, "XPENDING", KEYS[5], %q)
if ok and type(p) == "table" then pending = tonumber(p[1]) or 0 end
local c = redis.call("HMGET", KEYS[7], %q, %q, %q)
local s = table.concat({now, redis.call("HLEN", KEYS[4]), redis.call("XLEN", KEYS[5]), pending,
  redis.call("HLEN", KEYS[6]), tonumber(c[1]) or 0, tonumber(c[2]) or 0, tonumber(c[3]) or 0}, " ")
redis.call("LPUSH", KEYS[3], s)
redis.call("LTRIM", KEYS[3], 0, tonumber(ARGV[2]) - 1)
redis.call("PEXPIRE", KEYS[3], ARGV[3])
return 1
`, shutdownFlag, routerGroup, counterStarted, counterStartsFailed, counterRecovered))
