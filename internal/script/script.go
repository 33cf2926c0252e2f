// Package script runs shepherd's Lua scripts on Redis.
//
// Every script in shepherd is a package-level *redis.Script whose comment
// states its KEYS, ARGV and what it returns. Callers run them through Run,
// so that a script error always names the operation that failed and keeps
// the underlying error (redis.Nil, a context error, a connection error)
// matchable with errors.Is.
package script

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/redis/go-redis/v9"

	shkeys "github.com/shepherd-go/shepherd/internal/keys"
	"github.com/shepherd-go/shepherd/internal/redisutil"
	"github.com/shepherd-go/shepherd/internal/replica"
)

// Run runs s with keys and args via EVALSHA, falling back to EVAL when the
// script is not cached yet (after a Redis restart, for instance). Errors
// are wrapped as "op: err"; redis.Nil is returned as is, since callers
// branch on it. On a Redis Cluster client, a call that Redis did not
// answer makes the client reload its map of the slots (reloadSlots).
//
// Every call also declares the slot guard of its first key (WithGuard):
// while Redis Cluster moves the keys' slot to another master, Redis
// refuses the call with TRYAGAIN before running any of it, and Run tries
// again (as after a MOVED or ASK that go-redis did not follow to the
// end), backing off from 5 ms to 100 ms, until the move is over and the
// script runs, or ctx ends (then it returns the last error: TRYAGAIN,
// or ctx's). A slot left half-moved (a reshard that stopped midway, until
// `redis-cli --cluster fix`) thus fails every call on it once its ctx
// ends. Try is Run without these retries.
func Run(ctx context.Context, rdb redis.Scripter, s *redis.Script, op string, keys []string, args ...any) (any, error) {
	keys = WithGuard(keys)
	return whileMoving(ctx, func() (any, error) { return run(ctx, rdb, s, op, keys, args) })
}

// whileMoving calls call until it returns no Moving error, backing off
// from firstMovingWait to lastMovingWait, or ctx ends (then it returns
// the last error).
func whileMoving(ctx context.Context, call func() (any, error)) (any, error) {
	wait := firstMovingWait
	for {
		res, err := call()
		if err == nil || !Moving(err) {
			return res, err
		}
		select {
		case <-ctx.Done():
			return nil, err
		case <-time.After(wait):
		}
		wait = min(2*wait, lastMovingWait)
	}
}

// Try runs s once, as Run does, and returns a Moving error at once: for
// callers that have retries of their own and should not wait for one
// slot (the queue's feed, which serves many shards).
func Try(ctx context.Context, rdb redis.Scripter, s *redis.Script, op string, keys []string, args ...any) (any, error) {
	return run(ctx, rdb, s, op, WithGuard(keys), args)
}

// The waits between the tries of a call refused while its slot moves.
const (
	firstMovingWait = 5 * time.Millisecond
	lastMovingWait  = 100 * time.Millisecond
)

func run(ctx context.Context, rdb redis.Scripter, s *redis.Script, op string, keys []string, args []any) (any, error) {
	res, err := s.Run(ctx, rdb, keys, args...).Result()
	if err == redis.Nil {
		return nil, redis.Nil
	}
	if err != nil {
		reloadSlots(rdb, err)
		return nil, fmt.Errorf("%s: %w", op, err)
	}
	return res, nil
}

// Moving reports whether err is Redis Cluster refusing a call because
// the slot of its keys is moving between two masters (TRYAGAIN), or
// serves it elsewhere (MOVED, ASK: go-redis follows these, and returns
// the last one when the move used up its redirects): the call did not
// run, and may be sent again.
func Moving(err error) bool {
	switch redisutil.ErrorCode(err) {
	case "TRYAGAIN", "MOVED", "ASK":
		return true
	}
	return false
}

// WithGuard returns keys with the slot guard of keys[0] (keys.Guard)
// appended, in a new slice; keys not made by internal/keys are returned
// as they are. A script never reads the guard (it is past the keys it
// names) and nothing writes it: declared, it makes Redis Cluster refuse
// the call while the slot moves, as Run says.
func WithGuard(keys []string) []string {
	if len(keys) == 0 {
		return keys
	}
	g, ok := shkeys.Guard(keys[0])
	if !ok {
		return keys
	}
	out := make([]string, len(keys)+1)
	copy(out, keys)
	out[len(keys)] = g
	return out
}

// reloadSlots makes a Redis Cluster client reload its map of which node
// serves which slot after a call that failed with no answer from Redis
// (refused, reset, timed out): the node may be a master that died, whose
// replica now serves its slots. go-redis reloads the map on a MOVED reply,
// which a dead master never sends, and otherwise only every
// ClusterStateReloadInterval (a minute by default), so that after a
// failover its calls, and its sharded pub/sub, would go on to the dead
// master for up to that long. The reload runs in the background, one at
// a time at most every 200 ms (go-redis), and costs one CLUSTER SLOTS.
// An error reply (a Lua error, CLUSTERDOWN, ...), a closed client or a
// cancelled call reloads nothing.
func reloadSlots(rdb redis.Scripter, err error) {
	cc, ok := rdb.(*redis.ClusterClient)
	if !ok {
		return
	}
	var reply redis.Error
	if errors.As(err, &reply) || errors.Is(err, redis.ErrClosed) || errors.Is(err, context.Canceled) {
		return
	}
	cc.ReloadState(context.Background())
}

// RunAcked is Run with replicated acknowledgement: when a is on, the
// script call and WAIT a.N a.Timeout go in one pipeline, on one
// connection to the master of keys[0] (replica.Pipe), so that the WAIT
// counts the script's writes. It returns the script's reply and, when
// fewer replicas than a.N acknowledged in time, an error wrapping a
// *replica.Error ("op: ..."), with the reply: the script ran on the
// master. A script not loaded yet (NOSCRIPT: the WAIT then confirmed
// nothing of it) runs again by EVAL, and a slot that moves is waited for,
// as Run does. With a off it is Run.
func RunAcked(ctx context.Context, rdb redis.UniversalClient, s *redis.Script, op string, keys []string, a replica.Ack, args ...any) (any, error) {
	if !a.On() {
		return Run(ctx, rdb, s, op, keys, args...)
	}
	keys = WithGuard(keys)
	return whileMoving(ctx, func() (any, error) { return runAcked(ctx, rdb, s, op, keys, a, args) })
}

func runAcked(ctx context.Context, rdb redis.UniversalClient, s *redis.Script, op string, keys []string, a replica.Ack, args []any) (any, error) {
	var cmd *redis.Cmd
	w, err := replica.Pipe(ctx, rdb, keys[0], a, func(p redis.Pipeliner) { cmd = s.EvalSha(ctx, p, keys, args...) })
	if cmd != nil && redisutil.HasErrorCode(cmd.Err(), "NOSCRIPT") {
		w, err = replica.Pipe(ctx, rdb, keys[0], a, func(p redis.Pipeliner) { cmd = s.Eval(ctx, p, keys, args...) })
	}
	if cmd == nil {
		// Pipe found no master to send to.
		reloadSlots(rdb, err)
		return nil, fmt.Errorf("%s: %w", op, err)
	}
	res, cerr := cmd.Result()
	if cerr != nil && cerr != redis.Nil {
		reloadSlots(rdb, cerr)
		return nil, fmt.Errorf("%s: %w", op, cerr)
	}
	// The script ran (its reply, or redis.Nil, is in res and cerr); the
	// WAIT after it may not have counted enough replicas, or failed.
	if werr := replica.Check(w, a); werr != nil {
		return res, fmt.Errorf("%s: %w", op, werr)
	}
	return res, cerr
}
