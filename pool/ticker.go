package pool

import (
	"context"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/shepherd-go/shepherd/internal/member"
	"github.com/shepherd-go/shepherd/internal/script"
)

// A Ticker is a cluster ticker: a named ticker that ticks once per period
// across the pool, on one of the nodes that hold a Ticker of that name.
// The node that delivers the ticks holds the ticker's lease; when it
// dies, is paused or cut off, another node takes over once the lease
// lapses (about WorkerTTL, by Redis's clock). Each tick is delivered
// once: one script on Redis advances the ticker and hands the tick to
// one node. While a holding node lives and keeps up no tick is missed;
// ticks that fell due while no node held the ticker (a handover) are
// skipped, all but the latest, which is delivered late
// (TickerInfo.Skipped counts them). A receiver slower than the period,
// or a holder stalled for longer than one, skips ticks the same way, as
// time.Ticker drops them for a slow receiver.
type Ticker struct {
	// C delivers the ticks this node is given: each tick's time, by
	// Redis's clock. It is closed once the ticker stopped on this node
	// (Stop, StopTicker on any node, or the node closed).
	C <-chan time.Time

	c      chan time.Time
	n      *Node
	name   string
	inc    string
	period time.Duration // as this node asked for it
	token  string        // the lease this node holds ("" for none)
	stop   chan struct{}
	once   sync.Once
	logger *slog.Logger
}

// NewTicker starts receiving the pool's ticker name, creating it with
// period if the pool has none of that name (its first tick one period
// later); a node that asks for an existing ticker with another period
// changes the period for all. It returns an error wrapping
// ErrInvalidOption for an invalid name or a period below
// MinScheduleInterval; ErrNodeClosed or ErrPoolShutdown; or the Redis
// error that stopped it.
func (n *Node) NewTicker(ctx context.Context, name string, period time.Duration) (*Ticker, error) {
	if err := checkUnitName("ticker", name); err != nil {
		return nil, err
	}
	if period < MinScheduleInterval {
		return nil, fmt.Errorf("%w: ticker %q: period %v below %v", ErrInvalidOption, name, period, MinScheduleInterval)
	}
	if err := n.errClosed(); err != nil {
		return nil, err
	}
	if _, ok := n.shutdown.Get(shutdownFlag); ok {
		return nil, ErrPoolShutdown
	}
	inc, err := n.run(ctx, createTickerScript, "ticker", []string{n.lay.ticker(name), n.lay.tickers},
		name, period.Milliseconds(), newID())
	if err != nil {
		return nil, err
	}
	c := make(chan time.Time, 1)
	t := &Ticker{C: c, c: c, n: n, name: name, inc: fmt.Sprint(inc), period: period, stop: make(chan struct{}),
		logger: n.logger.With(slog.String("ticker", name))}
	if !n.loops.Go(t.loop) {
		return nil, n.errClosed()
	}
	return t, nil
}

// Name returns the ticker's name.
func (t *Ticker) Name() string { return t.name }

// Stop stops the ticker on this node: C is closed, and if this node held
// the ticker, another node holding it takes over within WorkerTTL/3. The other
// nodes keep ticking; StopTicker stops the ticker for all. Stop does not
// wait, and may be called more than once.
func (t *Ticker) Stop() { t.once.Do(func() { close(t.stop) }) }

// loop delivers ticks until the ticker stops here.
func (t *Ticker) loop() {
	defer close(t.c)
	defer t.release()
	renew := t.n.cfg.keepAliveEvery()
	for {
		wait, done := t.step(renew)
		if done {
			return
		}
		timer := time.NewTimer(wait)
		select {
		case <-t.n.ctx.Done():
			timer.Stop()
			return
		case <-t.stop:
			timer.Stop()
			return
		case <-timer.C:
		}
	}
}

// step runs tickScript once, delivers a tick it got, and returns how
// long to wait before the next step, or done.
func (t *Ticker) step(renew time.Duration) (time.Duration, bool) {
	if t.n.test.leasesPaused.Load() {
		return renew, false
	}
	room := len(t.c) == 0 // only this goroutine sends: the room stays
	ctx, cancel := context.WithTimeout(t.n.ctx, loopCallTimeout)
	res, err := t.n.run(ctx, tickScript, "ticker", []string{t.n.lay.ticker(t.name)},
		t.n.id, t.token, t.n.cfg.workerTTL.Milliseconds(), t.inc, room)
	cancel()
	if err != nil {
		if t.n.ctx.Err() == nil {
			t.logger.Warn("ticker: call failed", slog.Any("error", err))
		}
		return renew, false
	}
	v, _ := res.([]any)
	state := ""
	if len(v) > 0 {
		state, _ = v[0].(string)
	}
	ms := func(i int) time.Duration {
		x, _ := v[i].(int64)
		return time.Duration(x) * time.Millisecond
	}
	switch {
	case state == "GONE":
		t.logger.Warn("ticker gone from Redis (StopTicker, or Redis lost the pool's state): this node stops receiving it")
		return 0, true
	case state == "WAIT" && len(v) == 2:
		t.token = ""
		return min(ms(1)+time.Millisecond, renew), false
	case state == "HELD" && len(v) == 3:
		t.token, _ = v[1].(string)
		if !room {
			// The receiver has not taken the last tick: look again a
			// period later (a slow receiver skips ticks).
			return min(renew, t.period), false
		}
		return max(min(ms(2), renew), 0), false
	case state == "TICK" && len(v) == 4:
		t.token, _ = v[1].(string)
		at, _ := v[2].(int64)
		t.c <- time.UnixMilli(at)
		return max(min(ms(3), renew), 0), false
	}
	t.logger.Warn("ticker: unexpected reply", slog.Any("reply", res))
	return renew, false
}

// release gives the lease up, if this node holds it, so that another
// node holding the ticker takes over at once.
func (t *Ticker) release() { t.n.releaseLease(t.n.lay.ticker(t.name), t.token, t.logger) }

// StopTicker stops the ticker name of the pool poolName for every node,
// without joining the pool: their C channels close. It returns
// ErrNoSchedule when the pool has no such ticker, or an error wrapping
// ErrInvalidOption for a nil client or an invalid name.
func StopTicker(ctx context.Context, rdb redis.UniversalClient, poolName, name string) error {
	lay, err := poolLayout(rdb, poolName)
	if err != nil {
		return err
	}
	if err := checkUnitName("ticker", name); err != nil {
		return err
	}
	res, err := script.Run(ctx, rdb, stopTickerScript, "pool: stop ticker", []string{lay.ticker(name), lay.tickers}, name)
	if err != nil {
		return err
	}
	if res == int64(-1) {
		return fmt.Errorf("%w: ticker %q of pool %q", ErrNoSchedule, name, poolName)
	}
	return nil
}

// StopTicker stops the pool's ticker name for every node, as the
// function StopTicker does.
func (n *Node) StopTicker(ctx context.Context, name string) error {
	if err := n.errClosed(); err != nil {
		return err
	}
	return StopTicker(ctx, n.rdb, n.name, name)
}

// createTickerScript stores a ticker, or updates the period of the one
// stored (its next tick no later than one new period from now).
//
//	KEYS[1] ticker:NAME, KEYS[2] tickers
//	ARGV[1] name, ARGV[2] period (ms), ARGV[3] a new incarnation
//
// Returns the ticker's incarnation.
var createTickerScript = redis.NewScript(member.LuaClock + `
local now = now_ms()
local f = redis.call("HMGET", KEYS[1], "inc", "period", "next")
if f[1] then
  if f[2] ~= ARGV[2] then
    redis.call("HSET", KEYS[1], "period", ARGV[2], "next", math.min(tonumber(f[3]), now + tonumber(ARGV[2])))
  end
  return f[1]
end
redis.call("HSET", KEYS[1], "inc", ARGV[3], "period", ARGV[2], "next", now + tonumber(ARGV[2]),
  "created", now, "ticks", 0, "skipped", 0)
redis.call("SADD", KEYS[2], ARGV[1])
return ARGV[3]
`)

// tickScript takes or renews a ticker's lease and, for its holder, hands
// out the tick that is due.
//
//	KEYS[1] ticker:NAME
//	ARGV[1] node id, ARGV[2] this node's token ("" for none), ARGV[3]
//	TTL (ms), ARGV[4] the incarnation, ARGV[5] 1 if the node can take a
//	tick now
//
// Returns {"GONE"}, {"WAIT", ms until the holder's lease lapses},
// {"HELD", token, ms until the next tick} or {"TICK", token, the tick's
// time (ms), ms until the next tick}. Of the ticks due, only the latest
// is handed out; the others count as skipped.
var tickScript = redis.NewScript(member.LuaClock + member.LuaTokenLease + `
if redis.call("HGET", KEYS[1], "inc") ~= ARGV[4] then return {"GONE"} end
local now = now_ms()
local token, wait = token_hold(KEYS[1], ARGV[1], ARGV[2], tonumber(ARGV[3]), now)
if not token then return {"WAIT", wait} end
local f = redis.call("HMGET", KEYS[1], "next", "period")
local nxt, period = tonumber(f[1]), tonumber(f[2])
if ARGV[5] ~= "1" or now < nxt then return {"HELD", token, nxt - now} end
local behind = math.floor((now - nxt) / period)
local at = nxt + behind * period
redis.call("HSET", KEYS[1], "next", at + period, "last", at, "last_node", ARGV[1])
redis.call("HINCRBY", KEYS[1], "ticks", 1)
if behind > 0 then redis.call("HINCRBY", KEYS[1], "skipped", behind) end
return {"TICK", token, at, at + period - now}
`)

// releaseLease gives up the lease of a ticker's or a schedule's hash
// (key) held with token, if any: the next node to ask takes it rather
// than waiting for it to lapse. A crashed node (tests) releases nothing.
func (n *Node) releaseLease(key, token string, logger *slog.Logger) {
	if token == "" || n.test.crashed.Load() {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), releaseGrace)
	defer cancel()
	if _, err := n.run(ctx, releaseLeaseScript, "release lease", []string{key}, token); err != nil {
		logger.Debug("releasing the lease failed; it lapses", slog.Any("error", err))
	}
}

// releaseLeaseScript gives up the lease of a ticker or a schedule (KEYS[1])
// held with token ARGV[1]: the next node to ask takes it.
var releaseLeaseScript = redis.NewScript(member.LuaTokenLease + `
token_drop(KEYS[1], ARGV[1])
return 0
`)

// stopTickerScript removes a ticker.
//
//	KEYS[1] ticker:NAME, KEYS[2] tickers; ARGV[1] name
//
// Returns 1, or -1 when there is no such ticker.
var stopTickerScript = redis.NewScript(`
if redis.call("EXISTS", KEYS[1]) == 0 then return -1 end
redis.call("DEL", KEYS[1])
redis.call("SREM", KEYS[2], ARGV[1])
return 1
`)
