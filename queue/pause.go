package queue

import (
	"context"
	"fmt"

	"github.com/redis/go-redis/v9"

	"github.com/shepherd-go/shepherd/internal/script"
)

// Pause pauses the whole queue: tasks in flight finish, and no task
// starts on any process until Resume. Tasks a process took and has not
// started (taken ahead of its workers) go back to the queue, no attempt
// used, as soon as the process hears of the pause (a pub/sub message);
// one a worker picks up before that still starts. Submits are still accepted, and
// delayed tasks still come due; they wait. The pause is stored with the
// queue: it holds across restarts of processes (and of Redis, with AOF),
// and Stats reports it. Pausing a paused queue does nothing.
func (q *Client) Pause(ctx context.Context) error {
	return q.setPaused(ctx, "", true)
}

// Resume ends Pause: the idle workers of every process are woken at once.
func (q *Client) Resume(ctx context.Context) error {
	return q.setPaused(ctx, "", false)
}

// PauseTenant pauses a registered tenant: its tasks in flight finish, and
// none of its tasks starts until ResumeTenant; the other tenants go on.
// As with Pause, the tasks a process took and has not started go back
// (the other tenants' too: they are taken again).
// Acquire is not paused (it guards work outside the queue). Stored like
// Pause; Tenants reports it. ErrUnknownTenant when the tenant is not
// registered.
func (q *Client) PauseTenant(ctx context.Context, tenant string) error {
	if err := validTenant(tenant); err != nil {
		return err
	}
	return q.setPaused(ctx, tenant, true)
}

// ResumeTenant ends PauseTenant. ErrUnknownTenant when the tenant is not
// registered.
func (q *Client) ResumeTenant(ctx context.Context, tenant string) error {
	if err := validTenant(tenant); err != nil {
		return err
	}
	return q.setPaused(ctx, tenant, false)
}

func (q *Client) setPaused(ctx context.Context, tenant string, paused bool) error {
	arg := "0"
	if paused {
		arg = "1"
	}
	what := "queue: pause"
	if !paused {
		what = "queue: resume"
	}
	all, err := q.layouts(ctx)
	if err != nil {
		return err
	}
	if tenant != "" {
		all = []layout{tenantLayout(all, tenant)}
	}
	// The queue's pause is in every shard: each one's takes stop as it
	// is written there.
	for _, l := range all {
		res, err := script.Run(ctx, q.rdb, pauseScript, what, l.common(), l.commonArgs(tenant, arg)...)
		if err != nil {
			return err
		}
		if res == "UNKNOWN" {
			return fmt.Errorf("%w: %q", ErrUnknownTenant, tenant)
		}
	}
	return nil
}

// pauseScript pauses or resumes the queue (ARGV[4] "") or a tenant: the
// flag "P" in the settings hash (read with the TTL by take) or
// "p:TENANT" in the tenants hash, which take honours. A pause tells
// every process ("pause" on the wake channel), which gives back the
// tasks it took and has not started (Server.pauseSeen). A
// resumed tenant parked by its pause gets its turn back (take parks it
// again if it is at capacity), and the idle processes are woken.
//
//	ARGV[4] tenant ("" for the queue), ARGV[5] "1" pause, "0" resume
//
// Returns "OK" or "UNKNOWN" (the tenant is not registered; a removed
// tenant still draining may be resumed).
var pauseScript = redis.NewScript(prelude + `
local ten = ARGV[4]
local h, f = K_SETTINGS, 'P'
if ten ~= '' then
  h, f = K_TEN, 'p:' .. ten
  if not redis.call('HGET', K_TEN, 'c:' .. ten) and not (ARGV[5] == '0' and redis.call('HGET', K_TEN, 'g:' .. ten)) then
    return 'UNKNOWN'
  end
end
if ARGV[5] == '1' then
  redis.call('HSET', h, f, '1')
  redis.call(PUBLISH, P_CHAN .. 'wake', 'pause')
  return 'OK'
end
redis.call('HDEL', h, f)
if ten ~= '' and redis.call('SREM', K_PARKED, ten) == 1 then redis.call('RPUSH', K_TURNS, ten) end
wake()
return 'OK'
`)
