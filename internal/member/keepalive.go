package member

import (
	"context"
	"fmt"
	"time"
)

// A member keeps alive by recording, in its unit's keep-alive hash, the
// Redis time it was last seen (the seen and renew Lua helpers); others
// judge it dead when that time is older than the unit's TTL (lapsed), by
// Redis's clock only. A keep-alive has one of three outcomes, its
// Standing.
type Standing int

const (
	// OK: the member was alive, and its keep-alive is renewed.
	OK Standing = iota
	// Revived: the member had been declared dead (its keep-alive was
	// gone: it was paused or cut off for longer than the TTL). Its work
	// went to others; it must drop what it holds and join again.
	Revived
	// Lost: the unit's state was gone too (Redis restarted empty, or the
	// unit was deleted): the member joins again as the unit's first.
	Lost
)

// String returns "ok", "revived" or "lost", as the standing Lua helper
// does.
func (s Standing) String() string {
	switch s {
	case OK:
		return "ok"
	case Revived:
		return "revived"
	case Lost:
		return "lost"
	}
	return fmt.Sprintf("Standing(%d)", int(s))
}

// ParseStanding reads the standing Lua helper's reply.
func ParseStanding(v any) (Standing, error) {
	switch v {
	case "ok":
		return OK, nil
	case "revived":
		return Revived, nil
	case "lost":
		return Lost, nil
	}
	return OK, fmt.Errorf("member: unexpected standing %v", v)
}

// KeepAlive runs beat every interval, and at once when kick fires (nil
// for never), until ctx ends. beat bounds its own Redis calls and says
// whether the keep-alive was written: a failed one is tried again after
// KeepAliveRetry (or interval, if shorter), not a whole interval later,
// so that an outage of Redis shorter than the TTL less a retry costs no
// member its standing (one of a third of the TTL did, now and then: the
// next beat came an interval after the failed one).
func KeepAlive(ctx context.Context, interval time.Duration, kick <-chan struct{}, beat func(context.Context) bool) {
	t := time.NewTimer(interval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		case <-kick:
			if !t.Stop() {
				select {
				case <-t.C:
				default:
				}
			}
		}
		began := time.Now()
		next := min(KeepAliveRetry, interval)
		if beat(ctx) {
			next = interval - time.Since(began)
		}
		t.Reset(max(next, 0))
	}
}

// KeepAliveRetry is how soon KeepAlive tries a failed keep-alive again.
const KeepAliveRetry = 250 * time.Millisecond
