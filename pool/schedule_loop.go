package pool

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/shepherd-go/shepherd/internal/member"
)

// planner runs one Schedule call on its node: it holds the schedule's
// lease when it can, and plans when the schedule is due.
type planner struct {
	n         *Node
	producer  JobProducer
	name      string
	inc       string // the schedule's incarnation this planner plans for
	cfg       scheduleConfig
	logger    *slog.Logger
	token     string   // the lease this planner holds ("" for none)
	tokens    []string // the lease it holds in each shard (tokens[0] unused: token is shard 0's)
	held      bool     // it held every shard's lease at its last step
	lastToken string   // shard 0's token then
}

// loop runs until the node stops or the schedule ends.
func (p *planner) loop() {
	defer p.release()
	for {
		wait, done := p.step()
		if done {
			return
		}
		t := time.NewTimer(wait)
		select {
		case <-p.n.ctx.Done():
			t.Stop()
			return
		case <-t.C:
		}
	}
}

// step holds or asks for the lease and plans when due; it returns how
// long to wait before the next step, or done.
func (p *planner) step() (wait time.Duration, done bool) {
	if p.n.errClosed() != nil {
		return 0, true
	}
	renew := p.n.cfg.keepAliveEvery()
	if p.n.test.leasesPaused.Load() {
		return renew, false
	}
	res, err := p.hold(p.n.ctx)
	switch {
	case err == nil && res.state == "HELD":
		p.token = res.token
		res, err = p.holdShards(p.n.ctx, res)
	case err == nil && res.state == "WAIT":
		p.token = ""
	}
	if err != nil {
		if p.n.ctx.Err() == nil {
			p.logger.Warn("schedule: lease call failed", slog.Any("error", err))
		}
		return renew, false
	}
	switch res.state {
	case "GONE":
		p.logger.Warn("schedule gone from Redis (Unschedule, its producer ended it, or Redis lost the pool's state): this node stops planning it; Schedule again to plan it")
		return 0, true
	case "WAIT":
		if p.held {
			p.logger.Warn("schedule: lost the lease to another node")
		}
		p.held = false
		return min(res.ms+time.Millisecond, renew), false
	}
	if !p.held || res.token != p.lastToken {
		p.logger.Info("schedule: this node plans it now", slog.String("lease", res.token))
		p.held, p.lastToken = true, res.token
	}
	if res.ms > 0 {
		return min(res.ms, renew), false
	}
	if done := p.plan(res.token); done {
		return 0, true
	}
	return 0, false
}

// release gives the lease up, if this planner holds it, so that another
// node's planner takes the schedule over within WorkerTTL/3.
func (p *planner) release() {
	p.n.releaseLease(p.n.lay.plan(p.name), p.token, p.logger)
	for _, part := range p.n.partsOrSelf()[1:] {
		p.n.releaseLease(part.lay.plan(p.name), p.tokens[part.shard], p.logger)
	}
}

type holdResult struct {
	state string // "GONE", "WAIT" or "HELD"
	token string
	ms    time.Duration // WAIT: until the lease lapses; HELD: until due
}

// hold runs holdScheduleScript with the token this planner holds.
func (p *planner) hold(ctx context.Context) (holdResult, error) {
	return p.holdIn(ctx, p.n, p.token)
}

// holdIn runs holdScheduleScript in the shard of part (the node, or its
// part in another shard) with token.
func (p *planner) holdIn(ctx context.Context, part *Node, token string) (holdResult, error) {
	ctx, cancel := context.WithTimeout(ctx, loopCallTimeout)
	defer cancel()
	res, err := part.run(ctx, holdScheduleScript, "schedule lease", []string{part.lay.plan(p.name)},
		p.n.id, token, p.n.cfg.workerTTL.Milliseconds(), p.inc)
	if err != nil {
		return holdResult{}, err
	}
	v, _ := res.([]any)
	var r holdResult
	if len(v) > 0 {
		r.state, _ = v[0].(string)
	}
	switch {
	case r.state == "GONE" && len(v) == 1:
	case r.state == "WAIT" && len(v) == 2:
		ms, _ := v[1].(int64)
		r.ms = time.Duration(ms) * time.Millisecond
	case r.state == "HELD" && len(v) == 4:
		r.token, _ = v[1].(string)
		ms, _ := v[2].(int64)
		r.ms = time.Duration(ms) * time.Millisecond
	default:
		return holdResult{}, fmt.Errorf("pool: schedule lease: unexpected reply %v", res)
	}
	return r, nil
}

// plan asks the producer for a plan and applies it, fenced by token;
// it reports whether the schedule ended.
func (p *planner) plan(token string) (ended bool) {
	ctx, cancel := context.WithCancel(p.n.ctx)
	defer cancel()
	f := fence{key: p.n.lay.plan(p.name), token: token}
	if ok, err := p.fenced(ctx, beginPlanScript, f); err != nil || !ok {
		return false // the next step finds out why
	}
	kept := make(chan struct{})
	go func() {
		defer close(kept)
		p.keepLease(ctx, cancel)
	}()
	defer func() { cancel(); <-kept }()

	began := time.Now()
	plan, err := p.ask(ctx)
	end := errors.Is(err, ErrEndSchedule)
	var out outcome
	if plan != nil && (err == nil || end) {
		out = p.apply(ctx, plan)
	}
	if err != nil && !end {
		out.err = err.Error()
		p.logger.Warn("schedule: Plan failed; asking again at the next interval", slog.Any("error", err))
	}
	out.took = time.Since(began)
	p.record(f, out)
	if !end {
		return false
	}
	rctx, rcancel := context.WithTimeout(p.n.ctx, loopCallTimeout)
	defer rcancel()
	res, err := p.n.run(rctx, endScheduleScript, "end schedule",
		[]string{f.key, p.n.lay.plans, p.n.lay.planKeys(p.name)}, p.name, token)
	if err != nil || res != int64(1) {
		p.logger.Warn("schedule: ending it failed; the next planner asks again", slog.Any("reply", res), slog.Any("error", err))
		return false
	}
	if err := endInShards(rctx, p.n.rdb, p.n.layouts(), p.name); err != nil {
		p.logger.Warn("schedule: ended, but its notes in the other shards were not all removed", slog.Any("error", err))
	}
	p.logger.Info("schedule ended by its producer (ErrEndSchedule)")
	return true
}

// ask calls the producer's Plan; a panic is an error.
func (p *planner) ask(ctx context.Context) (plan *JobPlan, err error) {
	defer func() {
		if r := recover(); r != nil {
			plan, err = nil, fmt.Errorf("pool: Plan panicked: %v", r)
		}
	}()
	return p.producer.Plan(ctx)
}

// keepLease renews the lease every WorkerTTL/3 while a plan is made and
// applied, and cancels the plan when the lease is lost.
func (p *planner) keepLease(ctx context.Context, cancel context.CancelFunc) {
	t := time.NewTicker(p.n.cfg.keepAliveEvery())
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		if p.n.test.leasesPaused.Load() {
			continue
		}
		res, err := p.hold(ctx)
		if err == nil && res.state == "HELD" && res.token == p.token {
			res, err = p.holdShards(ctx, res)
		}
		if err != nil {
			continue // Redis is slow or away: the fences decide
		}
		if res.state != "HELD" || res.token != p.token {
			p.logger.Warn("schedule: lost the lease while planning; the plan is abandoned", slog.String("state", res.state))
			cancel()
			return
		}
	}
}

// fenced runs a script whose first key is the schedule's hash and first
// argument the token, and which replies 1, or 0 when fenced.
func (p *planner) fenced(ctx context.Context, s *redis.Script, f fence, more ...any) (bool, error) {
	ctx, cancel := context.WithTimeout(ctx, loopCallTimeout)
	defer cancel()
	res, err := p.n.run(ctx, s, "schedule", []string{f.key}, append([]any{f.token}, more...)...)
	return res == int64(1), err
}

// record stores the outcome of a plan with the schedule, if the lease
// still holds.
func (p *planner) record(f fence, out outcome) {
	ctx, cancel := context.WithTimeout(p.n.ctx, loopCallTimeout)
	defer cancel()
	errs, _ := json.Marshal(out.errs)
	if _, err := p.fenced(ctx, recordPlanScript, f,
		"planned", out.planned, "started", out.started, "stopped", out.stopped, "changed", out.changed,
		"failed", out.failed, "errors", string(errs), "error", out.err, "took_us", out.took.Microseconds()); err != nil {
		p.logger.Warn("schedule: recording the plan's outcome failed", slog.Any("error", err))
	}
}

// recordPlanScript stores a plan's outcome.
//
//	KEYS[1] plan:NAME; ARGV[1] token, then field, value pairs
//
// Returns 1, or 0 when fenced.
var recordPlanScript = redis.NewScript(member.LuaClock + member.LuaTokenFence + `
if token_fenced(KEYS[1], ARGV[1]) then return 0 end
redis.call("HSET", KEYS[1], "finished", now_ms(), unpack(ARGV, 2))
return 1
`)
