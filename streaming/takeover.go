package streaming

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/shepherd-go/shepherd/internal/script"
)

// ConsumerInfo describes a consumer of a sink's group, as Redis reports it.
type ConsumerInfo struct {
	Name string
	// Pending counts the entries delivered to the consumer and not yet
	// acknowledged.
	Pending int64
	// Idle is how long ago the consumer last read (or was delivered to).
	Idle time.Duration
}

// Consumers returns the consumers of the sink's group. A missing stream
// or group is no error: the result is empty.
func (s *Sink) Consumers(ctx context.Context) ([]ConsumerInfo, error) {
	list, err := s.stream.rdb.XInfoConsumers(ctx, s.stream.ks.stream(), s.group).Result()
	if isNoGroup(err) || isNoSuchKey(err) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("streaming: consumers of %s/%s: %w", s.stream.Name(), s.group, err)
	}
	out := make([]ConsumerInfo, len(list))
	for i, c := range list {
		out[i] = ConsumerInfo{Name: c.Name, Pending: c.Pending, Idle: c.Idle}
	}
	return out, nil
}

// takeOverScript claims up to ARGV[4] entries pending for a consumer that
// is known to be dead, for the caller, whatever their idle time; once the
// dead consumer owns nothing, it deletes it from the group, in the same
// call, so that nothing can be delivered to it between the last claim and
// its deletion.
//
// KEYS[1] the stream
// ARGV[1] group, ARGV[2] dead consumer, ARGV[3] taker, ARGV[4] most
// entries per call
// Returns {done (1 once the consumer is deleted), {{id, {field, value,
// ...}}, ...}}. Entries deleted from the stream are dropped from the
// pending list by XCLAIM itself (Redis 7) and not returned.
var takeOverScript = redis.NewScript(`
local max = tonumber(ARGV[4])
local p = redis.call('XPENDING', KEYS[1], ARGV[1], '-', '+', max, ARGV[2])
local claimed = {}
if #p > 0 then
  local ids = {}
  for i, e in ipairs(p) do ids[i] = e[1] end
  claimed = redis.call('XCLAIM', KEYS[1], ARGV[1], ARGV[3], 0, unpack(ids))
end
if #p < max then
  redis.call('XGROUP', 'DELCONSUMER', KEYS[1], ARGV[1], ARGV[2])
  return {1, claimed}
end
return {0, claimed}
`)

// TakeOver claims every entry pending for consumer, a consumer of the
// sink's group that the caller knows to be dead (its process stopped
// keeping alive by the caller's own measure), delivers them through this
// sink with Event.Reclaimed set, and deletes consumer from the group. It
// does not wait for the ack grace period: use it when liveness is known
// sooner, so that a dead or paused process's entries do not wait out the
// grace. If consumer is in fact alive, its entries are delivered twice
// (at least once, as ever). It returns how many entries it delivered;
// ctx's error or the Redis error that stopped it (what was claimed before
// is delivered). A missing group or stream is no error. Taking over the
// sink's own consumer is an error wrapping ErrInvalidOption. It first
// waits until the sink has read its own pending entries (its first read,
// at once unless Redis is unavailable), so that nothing it claims is
// delivered twice by this sink.
func (s *Sink) TakeOver(ctx context.Context, consumer string) (int, error) {
	if consumer == "" || consumer == s.cfg.consumer {
		return 0, fmt.Errorf("%w: cannot take over consumer %q", ErrInvalidOption, consumer)
	}
	// The sink first reads its own pending entries (a restart under the
	// same name); what this claims becomes its own pending entries too,
	// so that read would deliver it a second time, without Reclaimed.
	select {
	case <-s.ownDone:
	case <-s.life.done:
		return 0, nil // closing
	case <-ctx.Done():
		return 0, ctx.Err()
	}
	return s.takeOver(ctx, consumer, s.deliverFromCaller)
}

// takeOver claims consumer's pending entries and hands each to deliver,
// until it owns none and is deleted (TakeOver's work).
func (s *Sink) takeOver(ctx context.Context, consumer string, deliver func(*Event) bool) (int, error) {
	delivered := 0
	for {
		res, err := script.Run(ctx, s.stream.rdb, takeOverScript, "streaming.takeover",
			[]string{s.stream.ks.stream()}, s.group, consumer, s.cfg.consumer, s.cfg.maxPolled)
		if isNoGroup(err) {
			return delivered, nil
		}
		if err != nil {
			return delivered, err
		}
		done, entries, ok := parseTakeOver(res)
		if !ok {
			return delivered, errors.New("streaming: take over: malformed reply")
		}
		for _, e := range entries {
			ev := eventFromFields(s.stream.Name(), e.id, e.fields)
			ev.Reclaimed = true
			if !deliver(ev) {
				return delivered, nil // closing: the entries stay pending here
			}
			delivered++
		}
		if done {
			return delivered, nil
		}
	}
}

// parseTakeOver decodes takeOverScript's reply.
func parseTakeOver(res any) (done bool, entries []claimed, ok bool) {
	arr, isArr := res.([]any)
	if !isArr || len(arr) != 2 {
		return false, nil, false
	}
	flag, _ := arr[0].(int64)
	list, _ := arr[1].([]any)
	for _, item := range list {
		pair, _ := item.([]any)
		if len(pair) != 2 {
			continue // an entry deleted from the stream meanwhile
		}
		id, _ := pair[0].(string)
		fields, _ := pair[1].([]any)
		entries = append(entries, claimed{id: id, fields: fields})
	}
	return flag == 1, entries, true
}
