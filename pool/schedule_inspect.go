package pool

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strconv"
	"time"

	"github.com/redis/go-redis/v9"
)

// ScheduleInfo describes a schedule (Node.Schedule) in Stats.
type ScheduleInfo struct {
	Name     string        `json:"name"`
	Interval time.Duration `json:"interval_ns"`
	// Planner is the node that holds the schedule's lease ("" when its
	// lease lapsed: no node plans it right now).
	Planner string `json:"planner"`
	// Keys counts the jobs the schedule started or adopted and has not
	// stopped: those JobPlan.StopOthers may stop.
	Keys int `json:"keys"`
	// LastRun is when the last plan began (zero before the first);
	// LastTook how long asking for it and applying it took. LastError is
	// the plan's own error (Plan failed, or the planner lost its lease
	// while applying it), "" when none.
	LastRun   time.Time     `json:"last_run"`
	LastTook  time.Duration `json:"last_took_ns"`
	LastError string        `json:"last_error,omitempty"`
	// What the last plan did: the keys it wants running, those it
	// started, stopped, changed (restarted or notified with a new
	// payload), and those that failed, with the first errors ("key:
	// error"), tried again by the next plan.
	Planned int      `json:"planned"`
	Started int      `json:"started"`
	Stopped int      `json:"stopped"`
	Changed int      `json:"changed"`
	Failed  int      `json:"failed"`
	Errors  []string `json:"errors,omitempty"`
}

// TickerInfo describes a cluster ticker (Node.NewTicker) in Stats.
type TickerInfo struct {
	Name   string        `json:"name"`
	Period time.Duration `json:"period_ns"`
	// Holder is the node that delivers the ticks ("" when its lease
	// lapsed).
	Holder string `json:"holder"`
	// Next is when the next tick is due; Last when the last one was due
	// (zero before the first), LastNode the node it went to.
	Next     time.Time `json:"next"`
	Last     time.Time `json:"last"`
	LastNode string    `json:"last_node,omitempty"`
	// Ticks counts the ticks delivered; Skipped those that fell due while
	// no node could take them (a handover, a slow receiver).
	Ticks   int64 `json:"ticks"`
	Skipped int64 `json:"skipped"`
}

// readSchedules reads the pool's schedules and tickers: two round trips,
// O(schedules + tickers).
func readSchedules(ctx context.Context, rdb redis.UniversalClient, lay layout, now time.Time) ([]ScheduleInfo, []TickerInfo, error) {
	pipe := rdb.Pipeline()
	plansCmd := pipe.SMembers(ctx, lay.plans)
	tickersCmd := pipe.SMembers(ctx, lay.tickers)
	if _, err := pipe.Exec(ctx); err != nil {
		return nil, nil, fmt.Errorf("schedules: %w", err)
	}
	plans, tickers := plansCmd.Val(), tickersCmd.Val()
	slices.Sort(plans)
	slices.Sort(tickers)
	schedules, ticks := []ScheduleInfo{}, []TickerInfo{}
	if len(plans)+len(tickers) == 0 {
		return schedules, ticks, nil
	}
	pipe = rdb.Pipeline()
	planCmds := make([]*redis.MapStringStringCmd, len(plans))
	keyCmds := make([]*redis.IntCmd, len(plans))
	for i, name := range plans {
		planCmds[i] = pipe.HGetAll(ctx, lay.plan(name))
		keyCmds[i] = pipe.HLen(ctx, lay.planKeys(name))
	}
	tickerCmds := make([]*redis.MapStringStringCmd, len(tickers))
	for i, name := range tickers {
		tickerCmds[i] = pipe.HGetAll(ctx, lay.ticker(name))
	}
	if _, err := pipe.Exec(ctx); err != nil {
		return nil, nil, fmt.Errorf("schedules: %w", err)
	}
	for i, name := range plans {
		h := planCmds[i].Val()
		if len(h) == 0 {
			continue // removed meanwhile
		}
		si := ScheduleInfo{Name: name, Interval: ms(h["interval"]), Planner: holderOf(h, now),
			Keys: int(keyCmds[i].Val()), LastError: h["error"],
			Planned: atoi(h["planned"]), Started: atoi(h["started"]), Stopped: atoi(h["stopped"]),
			Changed: atoi(h["changed"]), Failed: atoi(h["failed"])}
		if at := atoi64(h["last"]); at > 0 {
			si.LastRun = time.UnixMilli(at)
		}
		si.LastTook = time.Duration(atoi64(h["took_us"])) * time.Microsecond
		if raw := h["errors"]; raw != "" && raw != "null" {
			if err := json.Unmarshal([]byte(raw), &si.Errors); err != nil {
				return nil, nil, fmt.Errorf("schedule %q: errors: %w", name, err)
			}
		}
		schedules = append(schedules, si)
	}
	for i, name := range tickers {
		h := tickerCmds[i].Val()
		if len(h) == 0 {
			continue
		}
		ti := TickerInfo{Name: name, Period: ms(h["period"]), Holder: holderOf(h, now),
			Next: time.UnixMilli(atoi64(h["next"])), LastNode: h["last_node"],
			Ticks: atoi64(h["ticks"]), Skipped: atoi64(h["skipped"])}
		if at := atoi64(h["last"]); at > 0 {
			ti.Last = time.UnixMilli(at)
		}
		ticks = append(ticks, ti)
	}
	return schedules, ticks, nil
}

// holderOf returns the node holding the lease of a schedule's or a
// ticker's hash h at now, or "".
func holderOf(h map[string]string, now time.Time) string {
	if atoi64(h["until"]) < now.UnixMilli() {
		return ""
	}
	return h["holder"]
}

func ms(s string) time.Duration { return time.Duration(atoi64(s)) * time.Millisecond }

func atoi(s string) int { return int(atoi64(s)) }

func atoi64(s string) int64 {
	v, _ := strconv.ParseInt(s, 10, 64)
	return v
}
