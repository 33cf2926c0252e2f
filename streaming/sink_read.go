package streaming

import (
	"errors"
	"fmt"

	"github.com/redis/go-redis/v9"

	"github.com/shepherd-go/shepherd/internal/backoff"
)

// readLoop reads new entries for this consumer until the sink stops. It
// first reads the consumer's own pending entries (ID "0"), which a sink
// restarted under the same consumer name was delivered before but did
// not acknowledge, then new ones (">").
func (s *Sink) readLoop() {
	bo := backoff.Backoff{Min: s.cfg.minBackoff, Max: s.cfg.maxBackoff}
	own := "0" // next own pending ID to read after; "" once they are done
	for !s.life.stopping() {
		err := s.readOnce(&own)
		if err == nil {
			bo.Reset()
			continue
		}
		if s.life.stopping() {
			return
		}
		if isNoGroup(err) {
			// Recreate, then still back off: a group that keeps vanishing
			// must not turn this loop into a hot one.
			if rerr := s.recreateGroup(); rerr != nil {
				s.rep.report("streaming: recreating consumer group failed; retrying", rerr)
			}
		} else {
			s.rep.report("streaming: sink read failed; retrying",
				fmt.Errorf("streaming: read %s/%s: %w", s.stream.Name(), s.group, err))
		}
		backoff.Sleep(bo.Next(), s.life.done)
	}
}

// readOnce runs one XREADGROUP and delivers what it returns.
func (s *Sink) readOnce(own *string) error {
	cmd, block, err := s.life.reads.cmd(s.ctx, s.cfg.block)
	if err != nil {
		return err
	}
	id := ">"
	if *own != "" {
		id = *own
	}
	if s.life.stopping() {
		return nil
	}
	res, err := cmd.XReadGroup(s.ctx, &redis.XReadGroupArgs{
		Group:    s.group,
		Consumer: s.cfg.consumer,
		Streams:  []string{s.stream.ks.stream(), id},
		Count:    s.cfg.maxPolled,
		Block:    block,
	}).Result()
	if errors.Is(err, redis.Nil) {
		return nil // the block timed out, or Close unblocked it
	}
	if err != nil {
		if fine(err) {
			return err // an error reply (NOGROUP, ...): the connection is fine
		}
		return errors.Join(err, s.life.reads.reset())
	}
	var msgs []redis.XMessage
	if len(res) > 0 {
		msgs = res[0].Messages
	}
	if *own != "" {
		if len(msgs) == 0 {
			*own = ""
			s.ownOnce.Do(func() { close(s.ownDone) })
			return nil
		}
		*own = msgs[len(msgs)-1].ID
	}
	for _, m := range msgs {
		ev := eventFromMessage(s.stream.Name(), m)
		if m.Values == nil && *own != "" {
			// An own pending entry that was deleted from the stream: it is
			// nothing to deliver, and acknowledging it clears it.
			if err := s.stream.rdb.XAck(s.ctx, s.stream.ks.stream(), s.group, m.ID).Err(); err != nil {
				return err
			}
			continue
		}
		if !s.deliver(ev) {
			return nil
		}
	}
	return nil
}
